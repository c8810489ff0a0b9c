#include "runner/store/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace runner::store {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.size() == 1) return sorted.front();
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(rank));
  const std::size_t upper = std::min(lower + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(lower);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

std::string noise_warning(const Summary& summary) {
  if (summary.n < 2 || !(summary.cv > kNoisyCoefficientOfVariation)) return {};
  const auto percent = [](double x) { return std::to_string(static_cast<int>(x * 100 + 0.5)) + "%"; };
  return summary.metric + " varies a lot (coefficient of variation " + percent(summary.cv) +
         ", above " + percent(kNoisyCoefficientOfVariation) +
         "): the machine was busy or the run is too short; treat its numbers with care";
}

Summary summarize(const std::string& metric, const std::string& unit, std::vector<double> values) {
  Summary s;
  s.metric = metric;
  s.unit = unit;
  s.n = static_cast<std::int64_t>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  if (values.size() > 1) {
    double sq = 0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(values.size() - 1));
  }
  s.p5 = percentile_sorted(values, 5);
  s.p95 = percentile_sorted(values, 95);
  s.cv = s.mean != 0 ? s.stddev / s.mean : 0;
  s.p50 = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p99 = percentile_sorted(values, 99);
  return s;
}

}  // namespace runner::store
