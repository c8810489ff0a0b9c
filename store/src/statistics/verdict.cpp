// The verdict of a comparison: the rank test and the bootstrap interval read
// together, the regression gate, and the verdict against a margin of
// practical equivalence (see statistics.hpp, docs/method.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "checks.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {

namespace detail {

void require_alpha(double alpha) {
  if (!(alpha > 0 && alpha < 1)) throw Error("alpha must be in (0, 1), got " + num(alpha));
}

}  // namespace detail

namespace {

// A p-value to two significant digits, keeping the trailing zero: "0.10", "0.057", "1.0".
std::string p_text(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#.2g", p);
  return buf;
}

}  // namespace

std::string sample_size_limit(std::size_t n_a, std::size_t n_b, double alpha) {
  const std::size_t least = least_runs_per_side(alpha);  // checks alpha
  if (smallest_two_sided_p(n_a, n_b) < alpha) return "";
  std::string out = n_a == n_b ? std::to_string(n_a) + (n_a == 1 ? " run a side" : " runs a side")
                               : std::to_string(n_a) + " and " + std::to_string(n_b) + " runs";
  out += " cannot reach p < " + detail::num(alpha) + "; " + std::to_string(least) +
         (n_a == n_b ? " is the least" : " a side is the least");
  // Four runs a side reach p < 0.05 only when every run of one side beats
  // every run of the other; five leave room for one overlapping run.
  if (least < kMinReliableRepetitions)
    out += ", " + std::to_string(kMinReliableRepetitions) + "+ recommended";
  return out;
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
  detail::require_alpha(options.alpha);
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
  c.smallest_p = smallest_two_sided_p(c.n_a, c.n_b);
  // Every value of a side equal (a held-out metric or a peak with one seed):
  // the rank test would see only ties and a tiny p for any difference, however
  // small; the difference is exact instead, and says nothing beyond this seed.
  const auto constant = [](const std::vector<double>& v) {
    return v.size() >= 2 && std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; });
  };
  c.deterministic = constant(a) && constant(b);
  const bool b_higher = c.ratio.lower > 1;
  const bool b_lower = c.ratio.upper < 1;
  if (c.deterministic) {
    if (c.median_b != c.median_a) {
      const bool b_better = (c.direction == Direction::lower_is_better) == (c.median_b < c.median_a);
      c.verdict = b_better ? Verdict::faster : Verdict::slower;
    }
  } else {
    // Both the rank test and the effect size must agree that there is a
    // difference: the test alone can flag a shift too small to be a ratio away
    // from 1, and the interval alone is too narrow with few runs (the percentile
    // bootstrap of a median undercovers at small n). Below the exact test's
    // floor, a p under alpha could only come from the normal approximation's
    // treatment of ties.
    c.significant = c.test.p_value < options.alpha && c.smallest_p < options.alpha &&
                    (b_higher || b_lower);
  }
  if (c.significant) {
    const bool b_better = direction == Direction::lower_is_better ? b_lower : b_higher;
    c.verdict = b_better ? Verdict::faster : Verdict::slower;
  }
  c.reliable = c.n_a >= kMinReliableRepetitions && c.n_b >= kMinReliableRepetitions;
  if (!c.reliable) c.warning = std::string(kUnreliableMessage);
  return c;
}

bool regression_beyond(const Comparison& result, double pct) {
  if (!(pct >= 0))
    throw Error("regression threshold must be at least 0 percent, got " + detail::num(pct));
  if (result.direction == Direction::higher_is_better && !(pct < 100))
    throw Error("regression threshold of a higher-is-better metric must be below 100 percent, got " +
                detail::num(pct));
  if (result.verdict != Verdict::slower) return false;
  // Without spread there is no interval to clear: the exact ratio is the answer.
  const double low = result.deterministic ? result.ratio.ratio : result.ratio.lower;
  const double high = result.deterministic ? result.ratio.ratio : result.ratio.upper;
  if (result.direction == Direction::lower_is_better) return low > 1 + pct / 100;
  return high < 1 - pct / 100;
}

double noise_margin_pct(const Comparison& c) {
  const double a = c.robust_a.value_or(0), b = c.robust_b.value_or(0);
  return std::max(kMinMarginPct, 100 * std::sqrt((a * a + b * b) / 2));
}

Practical practical_verdict(const Comparison& c, double margin_pct) {
  if (!(margin_pct >= 0))
    throw Error("the margin must be at least 0 percent, got " + detail::num(margin_pct));
  if (c.deterministic) return c.median_a == c.median_b ? Practical::same : Practical::differs;
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
    case Practical::differs: return "differs (the same value in every run)";
    case Practical::same: return "same (the same value in every run)";
    case Practical::undecided: break;
  }
  return "undecided (CI crosses +/-" + pct.str() + "%)";
}

UndecidedReason undecided_reason(const Comparison& c, double margin_pct) {
  if (!(c.smallest_p < c.alpha)) return UndecidedReason::too_few_runs;
  const double m = margin_pct / 100;
  const bool beyond = c.ratio.lower > 1 + m || c.ratio.upper < 1 - m;
  return beyond ? UndecidedReason::p_not_below_alpha : UndecidedReason::interval_crosses_margin;
}

std::string practical_text(const Comparison& c, double margin_pct) {
  const Practical verdict = practical_verdict(c, margin_pct);
  if (verdict != Practical::undecided) return practical_name(verdict, margin_pct);
  switch (undecided_reason(c, margin_pct)) {
    case UndecidedReason::too_few_runs:
      return "undecided (p = " + p_text(c.test.p_value) + ": " +
             sample_size_limit(c.n_a, c.n_b, c.alpha) + ")";
    case UndecidedReason::p_not_below_alpha:
      return "undecided (p = " + p_text(c.test.p_value) + ", not below " + detail::num(c.alpha) + ")";
    case UndecidedReason::interval_crosses_margin: break;
  }
  return practical_name(verdict, margin_pct);
}

}  // namespace runner::store
