// The percentile bootstrap: the interval of a median and of a ratio of two
// medians, drawn by one reproducible resampler (see statistics.hpp).
#include <algorithm>
#include <limits>
#include <tuple>

#include "checks.hpp"
#include "index_drawer.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {
namespace {

using detail::IndexDrawer;

// Median of a resample with replacement of `sorted` (ascending), drawn as
// multiplicities: counts[i] = how often sorted[i] was drawn. The resample's
// order statistics are found by walking the cumulative counts, so no sort is
// needed per resample (the bootstrap draws tens of thousands of them).
double resampled_median(const std::vector<double>& sorted, std::vector<std::uint32_t>& counts,
                        IndexDrawer& drawer) {
  const std::size_t n = sorted.size();
  std::fill(counts.begin(), counts.end(), 0U);
  for (std::size_t k = 0; k < n; ++k) ++counts[drawer.draw(static_cast<std::uint32_t>(n))];
  // Walk to the element holding rank (n - 1) / 2 of the resample (0-based).
  const std::size_t lo_rank = (n - 1) / 2;
  std::size_t i = 0;
  std::size_t through = counts[0];  // resample values <= sorted[i]
  while (through <= lo_rank) through += counts[++i];
  const double lo = sorted[i];
  if (n % 2 == 1) return lo;
  // Even n: the median also takes rank n / 2, the same element unless rank
  // lo_rank was the last copy of sorted[i].
  if (through > lo_rank + 1) return lo;
  do ++i;
  while (counts[i] == 0);
  return (lo + sorted[i]) / 2.0;
}

void require_options(const BootstrapOptions& options) {
  if (options.iterations < 100)
    throw Error("bootstrap iterations must be at least 100, got " + std::to_string(options.iterations));
  if (!(options.confidence > 0 && options.confidence < 1))
    throw Error("bootstrap confidence must be in (0, 1), got " + detail::num(options.confidence));
}

void require_size(const std::vector<double>& values) {
  constexpr std::size_t kMaxSide = std::numeric_limits<std::uint32_t>::max();
  if (values.size() > kMaxSide)
    throw Error("bootstrap sides are limited to " + std::to_string(kMaxSide) + " values");
}

std::vector<double> sorted_copy(const std::vector<double>& values) {
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// The percentile interval of the bootstrap distribution `estimates` (reordered).
std::pair<double, double> percentile_interval(std::vector<double>& estimates, double confidence) {
  const double tail = (1 - confidence) / 2;
  const double lower = detail::percentile_in_place(estimates, 100 * tail);
  return {lower, detail::percentile_in_place(estimates, 100 * (1 - tail))};
}

}  // namespace

RatioInterval bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                     const BootstrapOptions& options) {
  detail::require_values(a, "side A");
  detail::require_values(b, "side B");
  for (const auto* side : {&a, &b})
    for (double v : *side)
      if (!(v > 0))
        throw Error("side " + std::string(side == &a ? "A" : "B") + " has a value that is not positive (" +
                    detail::num(v) + "): a ratio of medians needs positive values");
  require_options(options);
  require_size(a);
  require_size(b);

  const std::vector<double> sa = sorted_copy(a), sb = sorted_copy(b);
  RatioInterval r;
  r.confidence = options.confidence;
  r.ratio = detail::median_sorted(sb) / detail::median_sorted(sa);

  IndexDrawer drawer(options.seed);
  std::vector<std::uint32_t> counts_a(sa.size()), counts_b(sb.size());
  std::vector<double> ratios(static_cast<std::size_t>(options.iterations));
  for (double& ratio : ratios) {
    // A then B from one engine: the order is part of the reproducibility contract.
    const double ma = resampled_median(sa, counts_a, drawer);
    const double mb = resampled_median(sb, counts_b, drawer);
    ratio = mb / ma;
  }
  std::tie(r.lower, r.upper) = percentile_interval(ratios, options.confidence);
  return r;
}

MedianInterval bootstrap_median(const std::vector<double>& values,
                                const BootstrapOptions& options) {
  detail::require_values(values, "the sample");
  require_options(options);
  require_size(values);

  const std::vector<double> sorted = sorted_copy(values);
  MedianInterval r;
  r.confidence = options.confidence;
  r.median = detail::median_sorted(sorted);
  IndexDrawer drawer(options.seed);
  std::vector<std::uint32_t> counts(sorted.size());
  std::vector<double> medians(static_cast<std::size_t>(options.iterations));
  for (double& m : medians) m = resampled_median(sorted, counts, drawer);
  std::tie(r.lower, r.upper) = percentile_interval(medians, options.confidence);
  return r;
}

}  // namespace runner::store
