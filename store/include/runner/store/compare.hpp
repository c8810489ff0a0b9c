// Statistics behind `runner compare`: descriptive helpers, the Mann-Whitney U
// test, a bootstrap confidence interval of the ratio of medians, the verdict
// rule and the fingerprint diff. No LibTorch, no SQLite: the inputs are the
// per-run values of one metric on each side (e.g. each run's median step
// time). The method and its validation are documented in docs/method.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runner::store {

// --- descriptive helpers ------------------------------------------------------

/// Median of `values` (the mean of the two middle values for an even count). Throws runner::Error if empty.
[[nodiscard]] double median(std::vector<double> values);

/// Percentile `q` in [0, 100] by linear interpolation (NumPy's default). Throws runner::Error if empty or q is outside [0, 100].
[[nodiscard]] double percentile(std::vector<double> values, double q);

/// Sample standard deviation (n - 1) over the mean; nullopt when undefined (fewer than 2 values or a zero mean).
[[nodiscard]] std::optional<double> coefficient_of_variation(const std::vector<double>& values);

/// The robust counterpart: 1.4826 x the median absolute deviation over the
/// median (equal to the CV for normal data; one outlying run barely moves
/// it); nullopt for fewer than 2 values or a zero median.
[[nodiscard]] std::optional<double> robust_variation(const std::vector<double>& values);

// --- Mann-Whitney U -------------------------------------------------------------

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

// --- bootstrap ------------------------------------------------------------------

/// Seed used when the caller gives none, so `runner compare` prints the same interval every time.
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

// --- verdict --------------------------------------------------------------------

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
  bool significant = false;             ///< p < alpha and the interval excludes 1.
  Verdict verdict = Verdict::no_significant_difference;  ///< B relative to A.
  bool reliable = true;                 ///< False when either side has fewer than kMinReliableRepetitions values.
  std::string warning;                  ///< kUnreliableMessage when not reliable, else empty.
};

/// Compares per-run values a (side A) and b (side B) of one metric: significant when p < alpha and the interval excludes 1, the sign taken from the interval. Throws runner::Error on invalid input.
[[nodiscard]] Comparison compare_samples(const std::vector<double>& a, const std::vector<double>& b,
                                         Direction direction, const CompareOptions& options = {});

/// True when B is significantly slower than A by more than pct percent: time ratio.lower > 1 + pct/100, throughput ratio.upper < 1 - pct/100. Throws runner::Error if pct < 0 (or >= 100 for throughput).
[[nodiscard]] bool regression_beyond(const Comparison& result, double pct);

// --- practical equivalence -------------------------------------------------------

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
  undecided,   ///< the interval crosses the margin: neither shown different nor equivalent
};

/// The verdict of `c` with margin `margin_pct` (>= 0): B is faster or slower
/// only when c is significant and its whole interval lies beyond 1 -+ margin
/// on that side; equivalent when the interval lies within [1 - m, 1 + m].
/// Throws runner::Error for a negative margin.
[[nodiscard]] Practical practical_verdict(const Comparison& c, double margin_pct);

/// "faster", "slower", "equivalent within +-1.2%" or "undecided (CI crosses +-1.2%)".
[[nodiscard]] std::string practical_name(Practical verdict, double margin_pct);

// --- schedule -------------------------------------------------------------------

/// One run's value and when it started (seconds on any common clock).
struct TimedValue {
  double start_s = 0;
  double value = 0;
};

/// How the runs of two sides were laid out in time, and the drift visible
/// within each side, for a warning when the sides ran in separate blocks
/// (a drift of the machine between the blocks then reads as an effect).
struct ScheduleCheck {
  /// Maximal stretches of one side in start order: 2 for two blocks, up to
  /// n_a + n_b for perfect alternation.
  std::size_t segments = 0;
  /// (segments - 2) / (most possible - 2): 0 for separate blocks, 1 for
  /// perfect alternation (1 when a side has a single run).
  double interleaving = 1;
  /// interleaving < kInterleavedEnough: the comparison mostly spans time.
  bool separate_blocks = false;
  double span_a_s = 0, span_b_s = 0;   ///< first to last start of each side
  double gap_s = 0;                    ///< from A's mean start time to B's
  /// Least-squares trend of each side's values over its own span, in percent
  /// of its median (at least 3 runs).
  std::optional<double> drift_a_pct, drift_b_pct;
  /// The trend within the sides (pooled slope) carried over the gap between
  /// them, in percent of A's median: the part of B/A that drift alone would
  /// explain if it went on between the blocks.
  std::optional<double> gap_drift_pct;
};

/// Below this interleaving, sides count as run in separate blocks.
inline constexpr double kInterleavedEnough = 0.5;

/// Lays the runs of both sides out in time. Throws runner::Error on an empty side.
[[nodiscard]] ScheduleCheck check_schedule(const std::vector<TimedValue>& a,
                                           const std::vector<TimedValue>& b);

// --- fingerprint diff -----------------------------------------------------------

/// One fingerprint key whose value differs between the sides.
struct FingerprintDifference {
  std::string key;                 ///< "area.key", e.g. "cpu.model".
  std::optional<std::string> a;    ///< Value on side A; nullopt when the key is absent there.
  std::optional<std::string> b;    ///< Value on side B; nullopt when the key is absent there.
};

/// Differing keys of two fingerprints, split by whether they can change a performance number.
struct FingerprintDiff {
  std::vector<FingerprintDifference> matters;  ///< Keys that can change performance, sorted by key.
  std::vector<FingerprintDifference> benign;   ///< Keys that cannot (hostname, commit, seed, ...), sorted by key.
  /// True when nothing differs at all.
  [[nodiscard]] bool empty() const { return matters.empty() && benign.empty(); }
};

/// True when a difference in fingerprint key `key` can change a performance number (unknown keys count as mattering).
[[nodiscard]] bool fingerprint_key_matters(std::string_view key);

/// Keys whose values differ, or that are present on one side only, classified with fingerprint_key_matters.
[[nodiscard]] FingerprintDiff diff_fingerprints(const std::map<std::string, std::string>& a,
                                                const std::map<std::string, std::string>& b);

}  // namespace runner::store
