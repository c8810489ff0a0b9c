// Descriptive statistics: the type-7 quantile, the median, the spread
// measures and a run's summary of a per-step series (see statistics.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "checks.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {
namespace detail {

std::string num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

void require_values(const std::vector<double>& values, std::string_view who) {
  if (values.empty()) throw Error(std::string(who) + " has no values");
  for (double v : values)
    if (!std::isfinite(v))
      throw Error(std::string(who) + " has a value that is not finite (" + num(v) + ")");
}

double median_sorted(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

namespace {

// Where quantile q of n values falls (NumPy's "linear", type 7): between the
// order statistics `lower` and lower + 1, `fraction` of the way.
struct Rank {
  std::size_t lower = 0;
  double fraction = 0;
};

Rank rank_of(std::size_t n, double q) {
  const double rank = q / 100.0 * static_cast<double>(n - 1);
  const auto lower = static_cast<std::size_t>(std::floor(rank));
  return {lower, rank - static_cast<double>(lower)};
}

}  // namespace

double percentile_in_place(std::vector<double>& values, double q) {
  const Rank r = rank_of(values.size(), q);
  const auto lower_it = values.begin() + static_cast<std::ptrdiff_t>(r.lower);
  std::nth_element(values.begin(), lower_it, values.end());
  const double lo = *lower_it;
  if (r.lower + 1 >= values.size()) return lo;
  const double hi = *std::min_element(lower_it + 1, values.end());
  return lo + (hi - lo) * r.fraction;
}

}  // namespace detail

double percentile_sorted(const std::vector<double>& sorted, double q) {
  const detail::Rank r = detail::rank_of(sorted.size(), q);
  const std::size_t upper = std::min(r.lower + 1, sorted.size() - 1);
  return sorted[r.lower] + (sorted[upper] - sorted[r.lower]) * r.fraction;
}

double median(std::vector<double> values) {
  if (values.empty()) throw Error("median of an empty sample");
  std::sort(values.begin(), values.end());
  return detail::median_sorted(values);
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) throw Error("percentile of an empty sample");
  if (!(q >= 0 && q <= 100)) throw Error("percentile must be in [0, 100], got " + detail::num(q));
  return detail::percentile_in_place(values, q);
}

std::optional<double> robust_variation(const std::vector<double>& values) {
  if (values.size() < 2) return std::nullopt;
  const double mid = median(values);
  if (mid == 0) return std::nullopt;
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::abs(v - mid));
  return 1.4826 * median(deviations) / std::abs(mid);
}

std::optional<double> coefficient_of_variation(const std::vector<double>& values) {
  if (values.size() < 2) return std::nullopt;
  const double n = static_cast<double>(values.size());
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  if (mean == 0) return std::nullopt;
  double sq = 0;
  for (double v : values) sq += (v - mean) * (v - mean);
  return std::sqrt(sq / (n - 1)) / std::fabs(mean);
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

std::string noise_warning(const Summary& summary) {
  if (summary.n < 2 || !(summary.cv > kNoisyCoefficientOfVariation)) return {};
  const auto percent = [](double x, int digits) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*f%%", digits, x * 100);
    return std::string(text);
  };
  const std::string limit = percent(kNoisyCoefficientOfVariation, 0);
  // The comparison is of the unrounded value; the printed one carries as
  // many decimals as it takes to read above the limit (10.3%, not 10%).
  std::string cv;
  for (int digits = 0; digits <= 6; ++digits) {
    cv = percent(summary.cv, digits);
    if (std::strtod(cv.c_str(), nullptr) > kNoisyCoefficientOfVariation * 100) break;
  }
  return summary.metric + " varies a lot (coefficient of variation " + cv + ", above " + limit +
         "): the machine was busy or the run is too short; treat its numbers with care";
}

}  // namespace runner::store
