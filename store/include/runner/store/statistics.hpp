// The statistics every command shows: descriptive summaries and quantiles,
// the bootstrap, the Mann-Whitney U rank test and the verdict of a
// comparison. `runner run` and `show` (summaries, noise warning), `compare`,
// `report` and `export` all call these functions, so one pair of sides gets
// one interval wherever it is printed. No LibTorch, no SQLite: the inputs are
// plain values (e.g. each run's median step time). Sources, one concept each:
// store/src/statistics/{descriptive,bootstrap,rank_test,verdict,expectation,sequential,
// change_points}.cpp. The
// method and its validation are documented in docs/method.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/store/store.hpp"

namespace runner::store {

// --- descriptive (descriptive.cpp) -----------------------------------------------

/// Median of `values` (the mean of the two middle values for an even count). Throws runner::Error if empty.
[[nodiscard]] double median(std::vector<double> values);

/// Percentile `q` in [0, 100] by linear interpolation between closest ranks (NumPy's default, "type 7"). Throws runner::Error if empty or q is outside [0, 100].
[[nodiscard]] double percentile(std::vector<double> values, double q);

/// percentile() of an ascending, non-empty `sorted` without copying or checking: the one type-7 quantile every summary and chart uses.
[[nodiscard]] double percentile_sorted(const std::vector<double>& sorted, double q);

/// Sample standard deviation (n - 1) over the mean; nullopt when undefined (fewer than 2 values or a zero mean).
[[nodiscard]] std::optional<double> coefficient_of_variation(const std::vector<double>& values);

/// The robust counterpart: 1.4826 x the median absolute deviation over the
/// median (equal to the CV for normal data; one outlying run barely moves
/// it); nullopt for fewer than 2 values or a zero median.
[[nodiscard]] std::optional<double> robust_variation(const std::vector<double>& values);

/// n, mean, sample standard deviation (n-1), min, p5, p50, p90, p95, p99, max and CV of `values`. An empty input gives n = 0 and zeros.
[[nodiscard]] Summary summarize(const std::string& metric, const std::string& unit,
                                std::vector<double> values);

/// A run whose step times have a coefficient of variation above this is
/// reported as noisy (torch.utils.benchmark warns on a similar spread).
inline constexpr double kNoisyCoefficientOfVariation = 0.10;

/// The warning for a noisy series, or "" when its spread is acceptable.
[[nodiscard]] std::string noise_warning(const Summary& summary);

// --- bootstrap (bootstrap.cpp) -----------------------------------------------------

/// Seed used when the caller gives none, so every command prints the same interval every time.
inline constexpr std::uint64_t kDefaultBootstrapSeed = 0x5eed'c0de'2024'0001ULL;

/// Settings of the percentile bootstrap.
struct BootstrapOptions {
  int iterations = 10000;                      ///< Resamples drawn (at least 100).
  double confidence = 0.95;                    ///< Two-sided confidence level in (0, 1).
  std::uint64_t seed = kDefaultBootstrapSeed;  ///< Seed of the std::mt19937_64 that draws the resamples.
};

/// A ratio with its confidence interval.
struct RatioInterval {
  double ratio = 1;        ///< Point estimate median(B) / median(A).
  double lower = 1;        ///< Lower bound of the interval.
  double upper = 1;        ///< Upper bound of the interval.
  double confidence = 0.95;  ///< Level of the interval.
};

/// Percentile-bootstrap interval of median(B) / median(A), resampling each side independently with replacement. Throws runner::Error on an empty side, a value that is not finite and positive, or bad options.
[[nodiscard]] RatioInterval bootstrap_median_ratio(const std::vector<double>& a,
                                                   const std::vector<double>& b,
                                                   const BootstrapOptions& options = {});

/// A median with its confidence interval.
struct MedianInterval {
  double median = 0;         ///< Point estimate: the sample's median.
  double lower = 0;          ///< Lower bound of the interval.
  double upper = 0;          ///< Upper bound of the interval.
  double confidence = 0.95;  ///< Level of the interval.
};

/// Percentile-bootstrap interval of the median of one sample, drawn as bootstrap_median_ratio draws each side. Throws runner::Error on an empty sample, a value that is not finite, or bad options.
[[nodiscard]] MedianInterval bootstrap_median(const std::vector<double>& values,
                                              const BootstrapOptions& options = {});

// --- Mann-Whitney U (rank_test.cpp) ------------------------------------------------

/// Both samples at most this size and no tied values: the exact distribution of U is used.
inline constexpr std::size_t kMannWhitneyExactMaxSize = 20;

/// Result of a two-sided Mann-Whitney U test of sample a against sample b.
struct MannWhitney {
  double u_a = 0;        ///< U of side A: pairs (a_i, b_j) with a_i > b_j, ties counted 1/2 (SciPy's statistic for mannwhitneyu(a, b)).
  double u_b = 0;        ///< U of side B: n_a * n_b - u_a.
  double p_value = 1;    ///< Two-sided p-value, at most 1.
  bool exact = false;    ///< True when p_value comes from the exact distribution, false for the normal approximation.
  double p_a_greater = 0.5;  ///< Common-language effect size u_a / (n_a * n_b): estimated P(A > B) + P(A = B) / 2.
};

/// Two-sided Mann-Whitney U test; exact without ties when both sizes are at most kMannWhitneyExactMaxSize, else normal approximation with tie and continuity correction. Throws runner::Error on an empty side or a non-finite value.
[[nodiscard]] MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

/// Smallest two-sided p-value the U test can give with n_a and n_b values: 2 / C(n_a + n_b, n_a), at most 1 (every A beyond every B, no ties; ties only raise it). 3 a side: 0.10.
[[nodiscard]] double smallest_two_sided_p(std::size_t n_a, std::size_t n_b);

/// The least n for which n values a side can reach p < alpha (smallest_two_sided_p(n, n) < alpha): 4 for alpha = 0.05. Throws runner::Error unless 0 < alpha < 1.
[[nodiscard]] std::size_t least_runs_per_side(double alpha);

/// Why n_a and n_b values cannot reach p < alpha and what would, e.g. "3 runs a side cannot reach p < 0.05; 4 is the least, 5+ recommended"; "" when they can. Throws runner::Error unless 0 < alpha < 1.
[[nodiscard]] std::string sample_size_limit(std::size_t n_a, std::size_t n_b, double alpha);

// --- sequential (sequential.cpp) --------------------------------------------------

/// A ratio interval by inverting the Mann-Whitney test (docs/method.md,
/// "Repetitions that stop when the answer is known").
struct RankRatioInterval {
  double ratio = 1;        ///< Point estimate median(B) / median(A), as compare's.
  double lower = 0;        ///< Lower bound; 0 when the sizes cannot give an interval at this level.
  double upper = 0;        ///< Upper bound; +infinity when the sizes cannot give one.
  double confidence = 0;   ///< Level the interval has (at least the one asked for).
  bool bounded = false;    ///< False when the sizes are too small for the level: (0, +inf).
};

/// Distribution-free interval of the scale ratio B / A at level `confidence`:
/// the pairwise log differences log(b_j) - log(a_i), sorted, from the c-th
/// smallest to the c-th largest, c the largest with 2 P(U < c) <= 1 -
/// confidence under the null distribution of U (exact up to
/// kSequentialExactMaxSize a side, normal beyond). Exact coverage for A/A
/// data at any size, so it can be taken to a level far beyond 95 %, which a
/// percentile bootstrap of a few runs cannot. Throws runner::Error on an empty
/// side, a value that is not finite and positive, or a level outside (0, 1).
[[nodiscard]] RankRatioInterval rank_ratio_interval(const std::vector<double>& a,
                                                    const std::vector<double>& b,
                                                    double confidence);

/// Sizes a side up to which rank_ratio_interval counts U's distribution exactly.
inline constexpr std::size_t kSequentialExactMaxSize = 60;

/// A design of repetitions that stop when the answer is known: one look
/// after every round from min_repeats to max_repeats.
struct SequentialDesign {
  std::size_t min_repeats = 3;   ///< First round after which the data is looked at.
  std::size_t max_repeats = 30;  ///< Last round; no look after it spends anything more.
  double alpha = 0.05;           ///< Chance, over every look together, that an interval misses.
};

/// The first round whose look can decide: the least n >= min_repeats for
/// which n runs a side reach a two-sided p of alpha / 2 (5 for alpha =
/// 0.05), or max_repeats when none before it can. Throws runner::Error on a
/// design with min_repeats < 2, max_repeats < min_repeats or alpha outside (0, 1).
[[nodiscard]] std::size_t first_deciding_round(const SequentialDesign& design);

/// The error spent at the look after round `round`: alpha / 2 at
/// first_deciding_round, the other alpha / 2 in equal shares over the rounds
/// after it up to max_repeats (all of alpha when it is the last), 0 before
/// it; a round past max_repeats spends max_repeats' share again (runs
/// recorded beyond the design). Summed over the rounds it is alpha, so by the
/// union bound every interval of the sequence covers with probability at
/// least 1 - alpha, however the looks are correlated.
[[nodiscard]] double sequential_alpha(const SequentialDesign& design, std::size_t round);

/// The interval of B / A at the look after round `round` (the repetitions
/// each trial of the sides has): rank_ratio_interval at level 1 -
/// sequential_alpha(design, round). Unbounded at a look that spends nothing.
[[nodiscard]] RankRatioInterval sequential_ratio_interval(const std::vector<double>& a,
                                                          const std::vector<double>& b,
                                                          const SequentialDesign& design,
                                                          std::size_t round);

// --- verdict (verdict.cpp) -----------------------------------------------------------

/// Which way is good for a metric: time is lower_is_better, throughput higher_is_better.
enum class Direction { lower_is_better, higher_is_better };

/// What the comparison concludes about side B relative to side A.
enum class Verdict { faster, slower, no_significant_difference };

/// "faster", "slower" or "no significant difference".
[[nodiscard]] std::string_view verdict_name(Verdict verdict);

/// Below this many values on either side a comparison is flagged unreliable.
inline constexpr std::size_t kMinReliableRepetitions = 5;

/// The warning attached to an unreliable comparison.
inline constexpr std::string_view kUnreliableMessage =
    "fewer than 5 repetitions per side: the result is unreliable";

/// Settings of compare_samples.
struct CompareOptions {
  double alpha = 0.05;             ///< Significance level of the Mann-Whitney test.
  BootstrapOptions bootstrap{};    ///< Settings of the ratio interval.
};

/// Everything `runner compare` reports for one metric.
struct Comparison {
  Direction direction = Direction::lower_is_better;  ///< How the metric was read.
  std::size_t n_a = 0;                  ///< Values on side A.
  std::size_t n_b = 0;                  ///< Values on side B.
  double median_a = 0;                  ///< Median of side A.
  double median_b = 0;                  ///< Median of side B.
  std::optional<double> cv_a;           ///< Coefficient of variation of side A (nullopt if undefined).
  std::optional<double> cv_b;           ///< Coefficient of variation of side B (nullopt if undefined).
  std::optional<double> robust_a;       ///< robust_variation of side A.
  std::optional<double> robust_b;       ///< robust_variation of side B.
  RatioInterval ratio;                  ///< median(B) / median(A) with its bootstrap interval.
  MannWhitney test;                     ///< Mann-Whitney U test of A against B.
  double alpha = 0.05;                  ///< Significance level used.
  double smallest_p = 0;                ///< smallest_two_sided_p(n_a, n_b): at alpha or above, no difference can be significant.
  bool deterministic = false;           ///< At least 2 values a side, every value of A equal and every value of B equal: no spread, so neither test nor interval applies (the ratio is exact).
  bool significant = false;             ///< p < alpha reachable and reached, and the interval excludes 1 (never for a deterministic comparison).
  Verdict verdict = Verdict::no_significant_difference;  ///< B relative to A.
  bool reliable = true;                 ///< False when either side has fewer than kMinReliableRepetitions values.
  std::string warning;                  ///< kUnreliableMessage when not reliable, else empty.
};

/// Compares per-run values a (side A) and b (side B) of one metric: significant when p < alpha and the interval excludes 1, the sign taken from the interval; a deterministic comparison's verdict is the sign of its exact difference. Throws runner::Error on invalid input.
[[nodiscard]] Comparison compare_samples(const std::vector<double>& a, const std::vector<double>& b,
                                         Direction direction, const CompareOptions& options = {});

/// True when B is significantly slower than A by more than pct percent: time ratio.lower > 1 + pct/100, throughput ratio.upper < 1 - pct/100; for a deterministic comparison, its exact ratio beyond the threshold. Throws runner::Error if pct < 0 (or >= 100 for throughput).
[[nodiscard]] bool regression_beyond(const Comparison& result, double pct);

/// The smallest default margin, in percent: below it a difference is never
/// called, however quiet the runs.
inline constexpr double kMinMarginPct = 0.5;

/// The default practical-equivalence margin of a comparison, in percent: the
/// measured run-to-run noise of its two sides, sqrt((r_a^2 + r_b^2) / 2)
/// with r the robust_variation of each side's per-run values, at least
/// kMinMarginPct. A difference smaller than what repeated runs of the same
/// thing vary by is not one worth calling; the robust spread keeps a single
/// disturbed run from widening the margin.
[[nodiscard]] double noise_margin_pct(const Comparison& c);

/// A comparison read against a margin of practical equivalence.
enum class Practical {
  faster,      ///< significant, and the whole interval is better than the margin
  slower,      ///< significant, and the whole interval is worse than the margin
  equivalent,  ///< the whole interval lies within +-margin
  undecided,   ///< neither shown different nor equivalent (undecided_reason says why)
  differs,     ///< deterministic, and A's value is not B's
  same,        ///< deterministic, and A's value is B's
};

/// The verdict of `c` with margin `margin_pct` (>= 0): B is faster or slower
/// only when c is significant and its whole interval lies beyond 1 -+ margin
/// on that side; equivalent when the interval lies within [1 - m, 1 + m].
/// Throws runner::Error for a negative margin.
[[nodiscard]] Practical practical_verdict(const Comparison& c, double margin_pct);

/// "faster", "slower", "equivalent within +-1.2%", "undecided (CI crosses +-1.2%)", "differs (the same value in every run)" or "same (the same value in every run)".
[[nodiscard]] std::string practical_name(Practical verdict, double margin_pct);

/// Why a comparison is undecided, in the order checked.
enum class UndecidedReason {
  too_few_runs,             ///< its sizes cannot reach p < alpha (see sample_size_limit)
  interval_crosses_margin,  ///< the interval reaches both into and beyond the margin
  p_not_below_alpha,        ///< the interval lies beyond the margin, but p >= alpha
};

/// The reason that applies to an undecided comparison (meaningless for another verdict).
[[nodiscard]] UndecidedReason undecided_reason(const Comparison& c, double margin_pct);

/// practical_verdict's name with the reason of an undecided one: "undecided (p = 0.10: 3 runs a side cannot reach p < 0.05; 4 is the least, 5+ recommended)", "undecided (CI crosses +/-1.4%)" or "undecided (p = 0.070, not below 0.05)". Throws runner::Error for a negative margin.
[[nodiscard]] std::string practical_text(const Comparison& c, double margin_pct);

// --- change points (change_points.cpp) -------------------------------------------

/// Seed of the change-point permutation test when the caller gives none: the same series gives the same change points every time.
inline constexpr std::uint64_t kDefaultChangePointSeed = 0x5eed'c0de'2024'0034ULL;

/// Settings of find_change_points (docs/method.md, "Change points").
struct ChangePointOptions {
  double alpha = 0.05;              ///< A split is kept when its permutation p is below this.
  int permutations = 199;           ///< Permutations per tested split (at least 19).
  std::size_t min_segment_runs = 3; ///< Values a segment needs on each side of a split: one outlying run cannot be a level.
  std::uint64_t seed = kDefaultChangePointSeed;  ///< Seed of the permutations.
  BootstrapOptions bootstrap{2000, 0.95, kDefaultBootstrapSeed};  ///< The interval of each change's ratio.
};

/// One change of level in a series of points.
struct ChangePoint {
  std::size_t index = 0;        ///< The point where the new level starts (0-based; never 0).
  std::size_t runs_before = 0;  ///< Values in the segment before it (from the previous change point).
  std::size_t runs_after = 0;   ///< Values in the segment after it (to the next change point).
  double before = 0;            ///< Median of the values of the segment before.
  double after = 0;             ///< Median of the values of the segment after.
  RatioInterval ratio;          ///< after / before with its bootstrap interval (excludes 1).
  double p_value = 1;           ///< Permutation p-value of the split when it was found.
};

/// The change points of a series whose point i holds the values of its
/// repetitions (`points[i]`, sizes may differ, a point may be empty): E-Divisive
/// means on the pooled ranks of the values, splits only between points, each
/// split kept when its permutation p < alpha and the bootstrap interval of
/// after/before excludes 1. By index. Throws runner::Error for a value that is
/// not finite and positive, or bad options.
[[nodiscard]] std::vector<ChangePoint> find_change_points(
    const std::vector<std::vector<double>>& points, const ChangePointOptions& options = {});

// --- expectation (expectation.cpp) --------------------------------------------------
// The verdict of one [[expect]]: the ratio B / A of per-run values against a
// claimed bound (docs/method.md, "Verdicts of expectations").

/// The bound an expectation states on B / A.
enum class BoundKind {
  ratio_below,        ///< holds when the whole interval is below `value`
  ratio_above,        ///< holds when the whole interval is above `value`
  equivalent_within,  ///< holds when the whole interval lies in [1 - value, 1 + value]
};

/// A claimed bound: its kind and its number (> 0).
struct ExpectedBound {
  BoundKind kind = BoundKind::ratio_below;  ///< which bound
  double value = 1;                         ///< the ratio, or the equivalence fraction
};

/// What the interval says about the bound.
enum class ExpectationVerdict { holds, refuted, undecided };

/// "holds", "refuted" or "undecided".
[[nodiscard]] std::string_view expectation_verdict_name(ExpectationVerdict verdict);

/// Computes the interval of median(B) / median(A) from the per-run values of
/// A and B. The default is bootstrap_median_ratio, the interval `runner
/// compare` prints; repeats = "auto" plugs in the anytime-valid confidence
/// sequence of sequential.cpp here, since an interval looked at after every
/// round must stay valid under repeated looks.
using RatioIntervalMethod =
    std::function<RatioInterval(const std::vector<double>& a, const std::vector<double>& b)>;

/// Settings of judge_expectation.
struct ExpectationOptions {
  BootstrapOptions bootstrap{};  ///< of the default interval (compare's)
  RatioIntervalMethod interval;  ///< empty: bootstrap_median_ratio with `bootstrap`
};

/// The verdict of one expectation.
struct ExpectationResult {
  ExpectationVerdict verdict = ExpectationVerdict::undecided;  ///< holds, refuted or undecided
  RatioInterval ratio;         ///< median(B) / median(A) with its interval (1, [1, 1] with no values)
  std::size_t n_a = 0;         ///< values on side A
  std::size_t n_b = 0;         ///< values on side B
  bool deterministic = false;  ///< every value of A equal and every value of B equal (2+ each): the ratio is exact
  /// Undecided: the runs a side to add that would likely decide it at the
  /// spread seen (see more_runs_per_side); nullopt when no number of runs is
  /// likely to (the estimate sits on the bound) or for a decided verdict.
  std::optional<std::size_t> more_runs;
  std::string reason;          ///< undecided: why, in words ("3 runs a side: at least 4 are needed")
};

/// The fewest values a side needs before a verdict other than undecided:
/// least_runs_per_side(1 - confidence), the size at which the rank test that
/// `compare` pairs with the interval can reach significance (4 at 95 %); a
/// deterministic pair needs 2.
[[nodiscard]] std::size_t least_runs_for_verdict(double confidence);

/// Whether interval [lower, upper] satisfies the bound wholly (holds), violates
/// it wholly (refuted), or neither (undecided); an edge touched counts as not
/// satisfied. Throws runner::Error for a bound value that is not finite and > 0.
[[nodiscard]] ExpectationVerdict verdict_of_interval(double lower, double upper,
                                                     const ExpectedBound& bound);

/// Runs a side to add so that `interval` (from `n` runs a side) would likely
/// fall wholly on one side of every edge of the bound that its ratio is not
/// on: each half-width, in log-ratio units, shrinking as 1 / sqrt(n), the
/// ratio staying where it is. At least 1; nullopt when the ratio sits on an
/// edge or the interval is unbounded (nothing to extrapolate from).
[[nodiscard]] std::optional<std::size_t> more_runs_per_side(const RatioInterval& interval,
                                                            std::size_t n,
                                                            const ExpectedBound& bound);

/// Judges per-run values `a` (side A) and `b` (side B) of one metric against
/// `bound`: the ratio and interval as `compare` computes them (or as
/// options.interval does), holds / refuted when the whole interval satisfies /
/// violates the bound, else undecided with the runs a side likely to decide
/// it. An empty side or too few runs is undecided, not an error. Throws
/// runner::Error for a value that is not finite and positive or a bound <= 0.
[[nodiscard]] ExpectationResult judge_expectation(const std::vector<double>& a,
                                                  const std::vector<double>& b,
                                                  const ExpectedBound& bound,
                                                  const ExpectationOptions& options = {});

}  // namespace runner::store
