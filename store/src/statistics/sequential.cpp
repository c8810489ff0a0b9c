// Intervals that stay valid when the data is looked at after every round:
// the rank (Mann-Whitney) interval of a ratio, and the schedule that spends
// the error over the looks (see statistics.hpp, docs/method.md "Repetitions
// that stop when the answer is known").
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "checks.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

void require_positive(const std::vector<double>& values, const char* who) {
  detail::require_values(values, who);
  for (double v : values)
    if (!(v > 0))
      throw Error(std::string(who) + " has a value that is not positive (" + detail::num(v) +
                  "): a ratio needs positive values");
}

// P(U <= u) for every u of the null distribution of U with sizes m and n, no
// ties: the coefficients of the Gaussian binomial [m+n choose m]_q over
// C(m+n, m). Built factor by factor, prod_{i<=m} (1 - q^{n+i}) / (1 - q^i):
// after each i the polynomial is [n+i choose i]_q, whose coefficients are
// counts, so the doubles stay non-negative between the steps.
std::vector<double> u_cdf(std::size_t m, std::size_t n) {
  std::vector<double> c(m * n + 1, 0.0);
  c[0] = 1;
  std::size_t degree = 0;
  for (std::size_t i = 1; i <= m; ++i) {
    degree += n;  // [n+i choose i]_q has degree i * n
    for (std::size_t k = degree; k >= n + i; --k) c[k] -= c[k - n - i];
    for (std::size_t k = i; k <= degree; ++k) c[k] += c[k - i];
  }
  double total = 0;
  for (double& v : c) {
    v = std::max(v, 0.0);
    total += v;
  }
  double running = 0;
  for (double& v : c) {
    running += v;
    v = running / total;
  }
  return c;
}

// Upper tail of the standard normal distribution, and its inverse by bisection
// (only levels are asked for, so 100 halvings are plenty).
double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }
double normal_isf(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (normal_sf(mid) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The largest c (0 when none) such that 2 P(U <= c - 1) <= alpha.
std::size_t critical_count(std::size_t m, std::size_t n, double alpha) {
  const std::size_t pairs = m * n;
  if (m <= kSequentialExactMaxSize && n <= kSequentialExactMaxSize) {
    const std::vector<double> cdf = u_cdf(std::min(m, n), std::max(m, n));
    std::size_t c = 0;
    // The tolerance keeps a level such as 0.90 (alpha 0.0999...98 in
    // doubles) from missing the tail of exactly 0.10 it names.
    while (c < pairs / 2 + 1 && 2 * cdf[c] <= alpha * (1 + 1e-12)) ++c;
    return c;
  }
  const double mu = static_cast<double>(pairs) / 2;
  const double sd = std::sqrt(static_cast<double>(pairs) * static_cast<double>(m + n + 1) / 12);
  // Continuity-corrected: P(U <= c - 1) ~ Phi((c - 1 + 0.5 - mu) / sd).
  const double c = std::floor(mu + 0.5 - sd * normal_isf(alpha / 2));
  return c < 1 ? 0 : std::min(static_cast<std::size_t>(c), pairs / 2);
}

// The k-th smallest (1-based) of d_ij = b_j - a_i over sorted a and b, found
// by bisection on the value with the pairs counted by binary search, so
// memory stays O(m + n) for any size. The same predicate decides every count,
// so the bisection ends on the exact d_ij.
double kth_difference(const std::vector<double>& a, const std::vector<double>& b, std::size_t k) {
  const auto count_at_most = [&](double x) {
    std::size_t count = 0;
    for (double ai : a)
      count += static_cast<std::size_t>(
          std::partition_point(b.begin(), b.end(), [&](double bj) { return bj - ai <= x; }) -
          b.begin());
    return count;
  };
  double lo = b.front() - a.back(), hi = b.back() - a.front();
  if (count_at_most(lo) >= k) return lo;
  // Invariant: count(lo) < k <= count(hi).
  for (int i = 0; i < 2200; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (count_at_most(mid) >= k ? hi : lo) = mid;
  }
  return hi;
}

void require_design(const SequentialDesign& d) {
  detail::require_alpha(d.alpha);
  if (d.min_repeats < 2)
    throw Error("a sequential design needs min_repeats >= 2, got " + std::to_string(d.min_repeats));
  if (d.max_repeats < d.min_repeats)
    throw Error("a sequential design needs max_repeats >= min_repeats, got " +
                std::to_string(d.max_repeats) + " < " + std::to_string(d.min_repeats));
}

}  // namespace

RankRatioInterval rank_ratio_interval(const std::vector<double>& a, const std::vector<double>& b,
                                      double confidence) {
  require_positive(a, "side A");
  require_positive(b, "side B");
  if (!(confidence > 0 && confidence < 1))
    throw Error("confidence must be in (0, 1), got " + detail::num(confidence));
  std::vector<double> la, lb;
  for (double v : a) la.push_back(std::log(v));
  for (double v : b) lb.push_back(std::log(v));
  std::sort(la.begin(), la.end());
  std::sort(lb.begin(), lb.end());

  RankRatioInterval r;
  r.ratio = median(b) / median(a);
  const std::size_t m = a.size(), n = b.size();
  const std::size_t c = critical_count(m, n, 1 - confidence);
  if (c == 0) {
    r.lower = 0;
    r.upper = kInfinity;
    r.confidence = 1;
    return r;
  }
  r.bounded = true;
  r.lower = std::exp(kth_difference(la, lb, c));
  r.upper = std::exp(kth_difference(la, lb, m * n + 1 - c));
  if (m <= kSequentialExactMaxSize && n <= kSequentialExactMaxSize)
    r.confidence = 1 - 2 * u_cdf(std::min(m, n), std::max(m, n))[c - 1];
  else
    r.confidence = confidence;
  return r;
}

std::size_t first_deciding_round(const SequentialDesign& design) {
  require_design(design);
  for (std::size_t n = design.min_repeats; n < design.max_repeats; ++n)
    if (smallest_two_sided_p(n, n) <= design.alpha / 2) return n;
  return design.max_repeats;
}

double sequential_alpha(const SequentialDesign& design, std::size_t round) {
  const std::size_t first = first_deciding_round(design);
  round = std::min(round, design.max_repeats);
  if (round < first) return 0;
  if (first == design.max_repeats) return design.alpha;
  if (round == first) return design.alpha / 2;
  return design.alpha / 2 / static_cast<double>(design.max_repeats - first);
}

RankRatioInterval sequential_ratio_interval(const std::vector<double>& a,
                                            const std::vector<double>& b,
                                            const SequentialDesign& design, std::size_t round) {
  const double spent = sequential_alpha(design, round);
  if (spent <= 0) {
    // Checked as a look that spends something would be, then left open.
    RankRatioInterval r = rank_ratio_interval(a, b, 0.5);
    r.lower = 0;
    r.upper = kInfinity;
    r.confidence = 1;
    r.bounded = false;
    return r;
  }
  return rank_ratio_interval(a, b, 1 - spent);
}

}  // namespace runner::store
