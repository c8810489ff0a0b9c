// The Mann-Whitney U rank test: exact distribution for small samples without
// ties, normal approximation otherwise (see statistics.hpp, docs/method.md).
#include <algorithm>
#include <cmath>

#include "checks.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {
namespace {

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

}  // namespace

double smallest_two_sided_p(std::size_t n_a, std::size_t n_b) {
  // C(n_a + n_b, k) by the running product, k the smaller side: every partial
  // product is itself a binomial coefficient, so each step stays exact while
  // it fits a double's mantissa and only rounds (or overflows to infinity,
  // giving 0) far beyond any sample that could not reach alpha.
  const std::size_t k = std::min(n_a, n_b), n = n_a + n_b;
  double orderings = 1;
  for (std::size_t i = 1; i <= k; ++i)
    orderings = orderings * static_cast<double>(n - k + i) / static_cast<double>(i);
  return std::min(1.0, 2.0 / orderings);
}

std::size_t least_runs_per_side(double alpha) {
  detail::require_alpha(alpha);
  std::size_t n = 1;
  while (!(smallest_two_sided_p(n, n) < alpha)) ++n;  // about log4(2 / alpha) steps
  return n;
}

MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  detail::require_values(a, "side A");
  detail::require_values(b, "side B");
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

}  // namespace runner::store
