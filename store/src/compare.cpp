#include "runner/store/compare.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "runner/common/error.hpp"
#include "runner/store/stats.hpp"

namespace runner::store {
namespace {

// A number as a person would write it, for error messages
// ("1.5", not std::to_string's "1.500000").
std::string num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

void require_values(const std::vector<double>& values, std::string_view side) {
  if (values.empty()) throw Error("side " + std::string(side) + " has no values");
  for (double v : values)
    if (!std::isfinite(v))
      throw Error("side " + std::string(side) + " has a value that is not finite (" + num(v) + ")");
}

// Median of an ascending, non-empty vector.
double median_sorted(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

// Upper tail of the standard normal distribution.
double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

// Two-sided exact p-value of U for sizes m (side A) and n (side B), no ties.
// counts[u] is the number of the C(m+n, m) equally likely orderings of the
// pooled sample in which side A's U equals u, built with the standard
// recurrence on the largest element: it is either an A (it beats all n B's,
// adding n to U) or a B (adding nothing):
//   c(m, n, u) = c(m-1, n, u-n) + c(m, n-1, u),  c(0, n, 0) = c(m, 0, 0) = 1.
// Counts fit in uint64 for m, n <= 20 (C(40, 20) < 2^38), so the tail sum is exact.
double exact_two_sided_p(std::size_t m, std::size_t n, double u_a) {
  // row[j] holds c(i, j, .) for the current i.
  std::vector<std::vector<std::uint64_t>> prev(n + 1), row(n + 1);
  for (std::size_t j = 0; j <= n; ++j) prev[j] = {1};  // i = 0: c(0, j, 0) = 1
  for (std::size_t i = 1; i <= m; ++i) {
    row[0] = {1};  // c(i, 0, 0) = 1
    for (std::size_t j = 1; j <= n; ++j) {
      std::vector<std::uint64_t> c(i * j + 1, 0);
      for (std::size_t u = 0; u < prev[j].size(); ++u) c[u + j] += prev[j][u];  // largest is an A
      for (std::size_t u = 0; u < row[j - 1].size(); ++u) c[u] += row[j - 1][u];  // largest is a B
      row[j] = std::move(c);
    }
    std::swap(prev, row);
  }
  const std::vector<std::uint64_t>& counts = prev[n];
  // The distribution is symmetric about m*n/2, so the two-sided p-value is
  // twice the upper tail at the larger of U_A and U_B (SciPy does the same).
  const double total_pairs = static_cast<double>(m * n);
  const auto u_high = static_cast<std::size_t>(std::max(u_a, total_pairs - u_a));
  std::uint64_t tail = 0, total = 0;
  for (std::size_t u = 0; u < counts.size(); ++u) {
    total += counts[u];
    if (u >= u_high) tail += counts[u];
  }
  return std::min(1.0, 2.0 * static_cast<double>(tail) / static_cast<double>(total));
}

// Unbiased indices in [0, n) from the engine, two per 64-bit draw, by
// Lemire's multiply-and-reject method (no division on the common path: the
// bootstrap draws hundreds of thousands of indices per comparison).
// std::uniform_int_distribution is not used because it is
// implementation-defined: intervals would differ between libstdc++ and libc++.
class IndexDrawer {
 public:
  explicit IndexDrawer(std::uint64_t seed) : rng_(seed) {}

  /// Uniform in [0, n); n must be in [1, 2^32).
  std::size_t draw(std::uint32_t n) {
    std::uint64_t m = std::uint64_t{next32()} * n;
    auto low = static_cast<std::uint32_t>(m);
    if (low < n) {
      const std::uint32_t threshold = (0U - n) % n;  // 2^32 mod n
      while (low < threshold) {
        m = std::uint64_t{next32()} * n;
        low = static_cast<std::uint32_t>(m);
      }
    }
    return static_cast<std::size_t>(m >> 32);
  }

 private:
  std::uint32_t next32() {
    if (have_high_) {
      have_high_ = false;
      return static_cast<std::uint32_t>(buffer_ >> 32);
    }
    buffer_ = rng_();
    have_high_ = true;
    return static_cast<std::uint32_t>(buffer_);
  }

  std::mt19937_64 rng_;
  std::uint64_t buffer_ = 0;
  bool have_high_ = false;
};

// Percentile q of `values` (linear interpolation, as percentile_sorted) in
// linear time: only the two order statistics around the rank are placed.
// Reorders `values`.
double percentile_unsorted(std::vector<double>& values, double q) {
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(rank));
  const auto lower_it = values.begin() + static_cast<std::ptrdiff_t>(lower);
  std::nth_element(values.begin(), lower_it, values.end());
  const double lo = *lower_it;
  if (lower + 1 >= values.size()) return lo;
  const double hi = *std::min_element(lower_it + 1, values.end());
  return lo + (hi - lo) * (rank - static_cast<double>(lower));
}

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

// Keys whose difference cannot change a performance number. Everything else,
// including keys added to the fingerprint later, is treated as mattering: a
// false "this may matter" costs a glance, a false "benign" hides a cause.
constexpr std::array<std::string_view, 5> kBenignKeys = {
    "host.hostname",           // the same hardware under another name
    "seed",                    // same shapes and work; only the values differ
    "software.git_commit",     // runner's own commit: plugins are identified by trial
    "software.git_dirty",      //   identity, and the engine's overhead is < 1% of a step
    "software.runner_version",
};

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) throw Error("median of an empty sample");
  std::sort(values.begin(), values.end());
  return median_sorted(values);
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) throw Error("percentile of an empty sample");
  if (!(q >= 0 && q <= 100)) throw Error("percentile must be in [0, 100], got " + num(q));
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, q);
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

MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  require_values(a, "A");
  require_values(b, "B");
  const std::size_t na = a.size(), nb = b.size(), n = na + nb;

  // Pool (value, from A?) and rank with average ranks for ties.
  std::vector<std::pair<double, bool>> pooled;
  pooled.reserve(n);
  for (double v : a) pooled.emplace_back(v, true);
  for (double v : b) pooled.emplace_back(v, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  double rank_sum_a = 0;
  double tie_term = 0;  // sum of t^3 - t over groups of t tied values
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k)
      if (pooled[k].second) rank_sum_a += avg_rank;
    tie_term += t * t * t - t;
    i = j;
  }

  MannWhitney r;
  const double dna = static_cast<double>(na), dnb = static_cast<double>(nb);
  r.u_a = rank_sum_a - dna * (dna + 1) / 2.0;
  r.u_b = dna * dnb - r.u_a;
  r.p_a_greater = r.u_a / (dna * dnb);

  if (tie_term == 0 && na <= kMannWhitneyExactMaxSize && nb <= kMannWhitneyExactMaxSize) {
    r.exact = true;
    r.p_value = exact_two_sided_p(na, nb, r.u_a);
    return r;
  }
  const double dn = static_cast<double>(n);
  const double mu = dna * dnb / 2.0;
  const double var = dna * dnb / 12.0 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (var <= 0) {  // every value tied: nothing distinguishes the sides
    r.p_value = 1;
    return r;
  }
  // Continuity correction toward the mean, on the larger U (as SciPy).
  const double z = (std::max(r.u_a, r.u_b) - mu - 0.5) / std::sqrt(var);
  r.p_value = std::clamp(2.0 * normal_sf(z), 0.0, 1.0);
  return r;
}

RatioInterval bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                     const BootstrapOptions& options) {
  require_values(a, "A");
  require_values(b, "B");
  for (const auto* side : {&a, &b})
    for (double v : *side)
      if (!(v > 0))
        throw Error("side " + std::string(side == &a ? "A" : "B") + " has a value that is not positive (" +
                    num(v) + "): a ratio of medians needs positive values");
  if (options.iterations < 100)
    throw Error("bootstrap iterations must be at least 100, got " + std::to_string(options.iterations));
  if (!(options.confidence > 0 && options.confidence < 1))
    throw Error("bootstrap confidence must be in (0, 1), got " + num(options.confidence));
  constexpr std::size_t kMaxSide = std::numeric_limits<std::uint32_t>::max();
  if (a.size() > kMaxSide || b.size() > kMaxSide)
    throw Error("bootstrap sides are limited to " + std::to_string(kMaxSide) + " values");

  std::vector<double> sa = a, sb = b;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  RatioInterval r;
  r.confidence = options.confidence;
  r.ratio = median_sorted(sb) / median_sorted(sa);

  IndexDrawer drawer(options.seed);
  std::vector<std::uint32_t> counts_a(sa.size()), counts_b(sb.size());
  std::vector<double> ratios(static_cast<std::size_t>(options.iterations));
  for (double& ratio : ratios) {
    // A then B from one engine: the order is part of the reproducibility contract.
    const double ma = resampled_median(sa, counts_a, drawer);
    const double mb = resampled_median(sb, counts_b, drawer);
    ratio = mb / ma;
  }
  const double tail = (1 - options.confidence) / 2;
  r.lower = percentile_unsorted(ratios, 100 * tail);
  r.upper = percentile_unsorted(ratios, 100 * (1 - tail));
  return r;
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::faster: return "faster";
    case Verdict::slower: return "slower";
    case Verdict::no_significant_difference: break;
  }
  return "no significant difference";
}

Comparison compare_samples(const std::vector<double>& a, const std::vector<double>& b,
                           Direction direction, const CompareOptions& options) {
  if (!(options.alpha > 0 && options.alpha < 1))
    throw Error("alpha must be in (0, 1), got " + num(options.alpha));
  Comparison c;
  c.direction = direction;
  c.alpha = options.alpha;
  c.test = mann_whitney_u(a, b);  // validates emptiness and finiteness first
  c.ratio = bootstrap_median_ratio(a, b, options.bootstrap);
  c.n_a = a.size();
  c.n_b = b.size();
  c.median_a = median(a);
  c.median_b = median(b);
  c.cv_a = coefficient_of_variation(a);
  c.cv_b = coefficient_of_variation(b);
  c.robust_a = robust_variation(a);
  c.robust_b = robust_variation(b);
  // Both the rank test and the effect size must agree that there is a
  // difference: the test alone can flag a shift too small to be a ratio away
  // from 1, and the interval alone is too narrow with few runs (the percentile
  // bootstrap of a median undercovers at small n).
  const bool b_higher = c.ratio.lower > 1;
  const bool b_lower = c.ratio.upper < 1;
  c.significant = c.test.p_value < options.alpha && (b_higher || b_lower);
  if (c.significant) {
    const bool b_better = direction == Direction::lower_is_better ? b_lower : b_higher;
    c.verdict = b_better ? Verdict::faster : Verdict::slower;
  }
  c.reliable = c.n_a >= kMinReliableRepetitions && c.n_b >= kMinReliableRepetitions;
  if (!c.reliable) c.warning = std::string(kUnreliableMessage);
  return c;
}

bool regression_beyond(const Comparison& result, double pct) {
  if (!(pct >= 0)) throw Error("regression threshold must be at least 0 percent, got " + num(pct));
  if (result.verdict != Verdict::slower) return false;
  if (result.direction == Direction::lower_is_better) return result.ratio.lower > 1 + pct / 100;
  if (!(pct < 100))
    throw Error("regression threshold of a higher-is-better metric must be below 100 percent, got " +
                num(pct));
  return result.ratio.upper < 1 - pct / 100;
}

double noise_margin_pct(const Comparison& c) {
  const double a = c.robust_a.value_or(0), b = c.robust_b.value_or(0);
  return std::max(kMinMarginPct, 100 * std::sqrt((a * a + b * b) / 2));
}

Practical practical_verdict(const Comparison& c, double margin_pct) {
  if (!(margin_pct >= 0)) throw Error("the margin must be at least 0 percent, got " + num(margin_pct));
  const double m = margin_pct / 100;
  const double lo = c.ratio.lower, hi = c.ratio.upper;
  if (c.significant) {
    const bool above = lo > 1 + m, below = hi < 1 - m;  // B's values beyond the margin
    if (above || below) {
      const bool b_better = c.direction == Direction::lower_is_better ? below : above;
      return b_better ? Practical::faster : Practical::slower;
    }
  }
  if (lo >= 1 - m && hi <= 1 + m) return Practical::equivalent;
  return Practical::undecided;
}

std::string practical_name(Practical verdict, double margin_pct) {
  std::ostringstream pct;
  pct.setf(std::ios::fixed);
  pct.precision(1);
  pct << margin_pct;
  switch (verdict) {
    case Practical::faster: return "faster";
    case Practical::slower: return "slower";
    case Practical::equivalent: return "equivalent within +/-" + pct.str() + "%";
    case Practical::undecided: break;
  }
  return "undecided (CI crosses +/-" + pct.str() + "%)";
}

namespace {

// Least-squares slope of value / median over start time, per second, with the
// sums a pooled slope needs.
struct Trend {
  double sxy = 0, sxx = 0, mean_t = 0;
  [[nodiscard]] std::optional<double> slope() const {
    return sxx > 0 ? std::optional<double>(sxy / sxx) : std::nullopt;
  }
};

Trend trend_of(const std::vector<TimedValue>& side) {
  std::vector<double> values;
  for (const auto& v : side) values.push_back(v.value);
  const double mid = median(values);
  Trend t;
  double mean_y = 0;
  for (const auto& v : side) {
    t.mean_t += v.start_s;
    mean_y += v.value / mid;
  }
  t.mean_t /= static_cast<double>(side.size());
  mean_y /= static_cast<double>(side.size());
  for (const auto& v : side) {
    t.sxy += (v.start_s - t.mean_t) * (v.value / mid - mean_y);
    t.sxx += (v.start_s - t.mean_t) * (v.start_s - t.mean_t);
  }
  return t;
}

std::pair<double, double> span_of(const std::vector<TimedValue>& side) {
  double first = side.front().start_s, last = first;
  for (const auto& v : side) {
    first = std::min(first, v.start_s);
    last = std::max(last, v.start_s);
  }
  return {first, last};
}

}  // namespace

ScheduleCheck check_schedule(const std::vector<TimedValue>& a, const std::vector<TimedValue>& b) {
  if (a.empty() || b.empty()) throw Error("check_schedule: each side needs at least one run");
  ScheduleCheck check;
  std::vector<std::pair<double, int>> order;
  for (const auto& v : a) order.emplace_back(v.start_s, 0);
  for (const auto& v : b) order.emplace_back(v.start_s, 1);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  check.segments = 1;
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i].second != order[i - 1].second) ++check.segments;
  const std::size_t small = std::min(a.size(), b.size());
  const std::size_t most = 2 * small + (a.size() != b.size() ? 1 : 0);
  check.interleaving =
      most <= 2 ? 1.0
                : static_cast<double>(check.segments - 2) / static_cast<double>(most - 2);
  check.separate_blocks = check.interleaving < kInterleavedEnough;
  const auto [a_first, a_last] = span_of(a);
  const auto [b_first, b_last] = span_of(b);
  check.span_a_s = a_last - a_first;
  check.span_b_s = b_last - b_first;
  const Trend ta = trend_of(a), tb = trend_of(b);
  check.gap_s = tb.mean_t - ta.mean_t;
  if (a.size() >= 3)
    if (const auto slope = ta.slope()) check.drift_a_pct = 100 * *slope * check.span_a_s;
  if (b.size() >= 3)
    if (const auto slope = tb.slope()) check.drift_b_pct = 100 * *slope * check.span_b_s;
  if (a.size() >= 3 && b.size() >= 3 && ta.sxx + tb.sxx > 0)
    check.gap_drift_pct = 100 * (ta.sxy + tb.sxy) / (ta.sxx + tb.sxx) * check.gap_s;
  return check;
}

bool fingerprint_key_matters(std::string_view key) {
  return std::find(kBenignKeys.begin(), kBenignKeys.end(), key) == kBenignKeys.end();
}

FingerprintDiff diff_fingerprints(const std::map<std::string, std::string>& a,
                                  const std::map<std::string, std::string>& b) {
  FingerprintDiff diff;
  auto add = [&](const std::string& key, std::optional<std::string> va, std::optional<std::string> vb) {
    auto& into = fingerprint_key_matters(key) ? diff.matters : diff.benign;
    into.push_back({key, std::move(va), std::move(vb)});
  };
  // Merge the two sorted maps so both outputs come out sorted by key.
  auto ia = a.begin();
  auto ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      add(ia->first, ia->second, std::nullopt);
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      add(ib->first, std::nullopt, ib->second);
      ++ib;
    } else {
      if (ia->second != ib->second) add(ia->first, ia->second, ib->second);
      ++ia;
      ++ib;
    }
  }
  return diff;
}

}  // namespace runner::store
