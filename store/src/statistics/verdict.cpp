// The verdict of a comparison: the rank test and the bootstrap interval read
// together, the regression gate, and the verdict against a margin of
// practical equivalence (see statistics.hpp, docs/method.md).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "checks.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {

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
    throw Error("alpha must be in (0, 1), got " + detail::num(options.alpha));
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
  if (!(pct >= 0))
    throw Error("regression threshold must be at least 0 percent, got " + detail::num(pct));
  if (result.verdict != Verdict::slower) return false;
  if (result.direction == Direction::lower_is_better) return result.ratio.lower > 1 + pct / 100;
  if (!(pct < 100))
    throw Error("regression threshold of a higher-is-better metric must be below 100 percent, got " +
                detail::num(pct));
  return result.ratio.upper < 1 - pct / 100;
}

double noise_margin_pct(const Comparison& c) {
  const double a = c.robust_a.value_or(0), b = c.robust_b.value_or(0);
  return std::max(kMinMarginPct, 100 * std::sqrt((a * a + b * b) / 2));
}

Practical practical_verdict(const Comparison& c, double margin_pct) {
  if (!(margin_pct >= 0))
    throw Error("the margin must be at least 0 percent, got " + detail::num(margin_pct));
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

}  // namespace runner::store
