// The verdict of one expectation: the interval of B / A read against a
// claimed bound, and how many more runs would likely decide an undecided one
// (statistics.hpp, docs/method.md "Verdicts of expectations").
#include <algorithm>
#include <cmath>

#include "checks.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {

namespace {

void require_bound(const ExpectedBound& bound) {
  if (!(std::isfinite(bound.value) && bound.value > 0))
    throw Error("the bound of an expectation must be finite and greater than 0, got " +
                detail::num(bound.value));
}

// The edges of the bound on B / A: one for a ratio, two for equivalence.
std::vector<double> edges_of(const ExpectedBound& bound) {
  if (bound.kind != BoundKind::equivalent_within) return {bound.value};
  std::vector<double> edges;
  if (bound.value < 1) edges.push_back(1 - bound.value);  // at or beyond 1 the lower edge is 0 or less
  edges.push_back(1 + bound.value);
  return edges;
}

bool constant(const std::vector<double>& v) {
  return v.size() >= 2 && std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; });
}

}  // namespace

std::string_view expectation_verdict_name(ExpectationVerdict verdict) {
  switch (verdict) {
    case ExpectationVerdict::holds: return "holds";
    case ExpectationVerdict::refuted: return "refuted";
    case ExpectationVerdict::undecided: break;
  }
  return "undecided";
}

std::size_t least_runs_for_verdict(double confidence) {
  return least_runs_per_side(1 - confidence);
}

ExpectationVerdict verdict_of_interval(double lower, double upper, const ExpectedBound& bound) {
  require_bound(bound);
  const double v = bound.value;
  switch (bound.kind) {
    case BoundKind::ratio_below:
      if (upper < v) return ExpectationVerdict::holds;
      if (lower >= v) return ExpectationVerdict::refuted;
      break;
    case BoundKind::ratio_above:
      if (lower > v) return ExpectationVerdict::holds;
      if (upper <= v) return ExpectationVerdict::refuted;
      break;
    case BoundKind::equivalent_within:
      if (lower >= 1 - v && upper <= 1 + v) return ExpectationVerdict::holds;
      if (upper < 1 - v || lower > 1 + v) return ExpectationVerdict::refuted;
      break;
  }
  return ExpectationVerdict::undecided;
}

std::optional<std::size_t> more_runs_per_side(const RatioInterval& interval, std::size_t n,
                                              const ExpectedBound& bound) {
  require_bound(bound);
  const double r = interval.ratio;
  if (!(r > 0 && interval.lower > 0 && std::isfinite(interval.upper)) || n == 0) return std::nullopt;
  // An edge is decided when the half of the interval facing it no longer
  // reaches it. Equivalence with the ratio inside needs both edges; with the
  // ratio outside, the nearest one decides (refuted).
  const double log_r = std::log(r);
  const double below = log_r - std::log(interval.lower);  // half-width towards smaller ratios
  const double above = std::log(interval.upper) - log_r;
  double needed = 0;  // runs a side
  const auto need = [&](double edge) -> bool {
    const double distance = std::log(edge) - log_r;
    if (distance == 0) return false;
    const double half = distance > 0 ? above : below;
    const double scale = half / std::abs(distance);
    needed = std::max(needed, std::ceil(static_cast<double>(n) * scale * scale));
    return true;
  };
  std::vector<double> edges = edges_of(bound);
  if (bound.kind == BoundKind::equivalent_within) {
    const bool inside = (edges.size() == 1 || r >= edges.front()) && r <= edges.back();
    if (!inside) {
      // Only the edge the ratio lies beyond.
      edges = {r > edges.back() ? edges.back() : edges.front()};
    }
  }
  for (const double edge : edges)
    if (!need(edge)) return std::nullopt;
  const double more = needed - static_cast<double>(n);
  // Far beyond any design: say so through a huge number rather than overflow.
  if (!(more < 1e9)) return static_cast<std::size_t>(1e9);
  return static_cast<std::size_t>(std::max(1.0, more));
}

ExpectationResult judge_expectation(const std::vector<double>& a, const std::vector<double>& b,
                                    const ExpectedBound& bound, const ExpectationOptions& options) {
  require_bound(bound);
  for (const auto* side : {&a, &b})
    for (double x : *side)
      if (!(std::isfinite(x) && x > 0))
        throw Error("every value of an expectation's sides must be finite and positive, got " +
                    detail::num(x));
  ExpectationResult out;
  out.n_a = a.size();
  out.n_b = b.size();
  const std::size_t least = least_runs_for_verdict(options.bootstrap.confidence);
  const std::size_t n = std::min(out.n_a, out.n_b);
  if (n == 0) {
    out.more_runs = least;
    out.reason = std::string(out.n_a == 0 ? "side A" : "side B") + " has no finished run";
    return out;
  }
  out.ratio = options.interval ? options.interval(a, b) : bootstrap_median_ratio(a, b, options.bootstrap);
  out.deterministic = constant(a) && constant(b);
  const std::size_t needs = out.deterministic ? 2 : least;
  if (n < needs) {
    out.more_runs = needs - n;
    out.reason = std::to_string(n) + (n == 1 ? " run" : " runs") + " a side: a verdict needs " +
                 std::to_string(needs);
    return out;
  }
  out.verdict = verdict_of_interval(out.ratio.lower, out.ratio.upper, bound);
  if (out.verdict != ExpectationVerdict::undecided) return out;
  out.more_runs = more_runs_per_side(out.ratio, n, bound);
  out.reason = out.more_runs ? "the interval crosses the bound"
                             : "the interval crosses the bound and the estimate lies on it";
  return out;
}

}  // namespace runner::store
