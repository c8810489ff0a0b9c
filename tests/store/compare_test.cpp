// Statistics behind `runner compare`: unit tests against hand-computed and
// SciPy reference values, and simulation tests (A/A false alarms, power)
// that prove the verdict rule does what docs/method.md says. Everything is
// seeded and synthetic: no timing, deterministic results.
#include "runner/store/fingerprint_diff.hpp"
#include "runner/store/schedule_check.hpp"
#include "runner/store/simulation.hpp"
#include "runner/store/statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using runner::Error;
using runner::store::bootstrap_median_ratio;
using runner::store::BootstrapOptions;
using runner::store::compare_samples;
using runner::store::CompareOptions;
using runner::store::Comparison;
using runner::store::Direction;
using runner::store::mann_whitney_u;
using runner::store::regression_beyond;
using runner::store::Verdict;

using runner::store::testing::Noise;
using runner::store::testing::simulate;
using runner::store::testing::simulate_runs;
using runner::store::testing::Workload;

// --- descriptive helpers --------------------------------------------------------

TEST(Descriptive, MedianOfOddEvenAndUnsortedInput) {
  EXPECT_DOUBLE_EQ(runner::store::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(runner::store::median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(runner::store::median({7}), 7);
}

TEST(Descriptive, PercentileMatchesNumpyLinear) {
  // np.percentile([15, 20, 35, 40, 50], [0, 25, 40, 50, 90, 100]) -> 15 20 29 35 46 50
  const std::vector<double> v{50, 15, 40, 20, 35};
  EXPECT_DOUBLE_EQ(runner::store::percentile(v, 0), 15);
  EXPECT_DOUBLE_EQ(runner::store::percentile(v, 25), 20);
  EXPECT_DOUBLE_EQ(runner::store::percentile(v, 40), 29);
  EXPECT_DOUBLE_EQ(runner::store::percentile(v, 50), 35);
  EXPECT_DOUBLE_EQ(runner::store::percentile(v, 90), 46);
  EXPECT_DOUBLE_EQ(runner::store::percentile(v, 100), 50);
  // np.percentile([3.5, 1.25, 9.0, 4.0], [10, 33, 75]) -> 1.925 3.4775 5.25
  const std::vector<double> w{3.5, 1.25, 9.0, 4.0};
  EXPECT_DOUBLE_EQ(runner::store::percentile(w, 10), 1.925);
  EXPECT_DOUBLE_EQ(runner::store::percentile(w, 33), 3.4775);
  EXPECT_DOUBLE_EQ(runner::store::percentile(w, 75), 5.25);
}

TEST(Descriptive, CoefficientOfVariationUsesSampleStddev) {
  // mean 5, sample variance 32/7; NumPy: x.std(ddof=1) / x.mean() = 0.427617987059879
  const auto cv = runner::store::coefficient_of_variation({2, 4, 4, 4, 5, 5, 7, 9});
  ASSERT_TRUE(cv.has_value());
  EXPECT_NEAR(*cv, 0.427617987059879, 1e-15);
  EXPECT_FALSE(runner::store::coefficient_of_variation({5}).has_value());
  EXPECT_FALSE(runner::store::coefficient_of_variation({-1, 1}).has_value());
}

TEST(Descriptive, InvalidInputThrows) {
  EXPECT_THROW_MSG((void)runner::store::median({}), Error, "median of an empty sample");
  EXPECT_THROW_MSG((void)runner::store::percentile({}, 50), Error, "percentile of an empty sample");
  EXPECT_THROW_MSG((void)runner::store::percentile({1, 2}, 101), Error,
                   "percentile must be in [0, 100], got 101");
}

// --- Mann-Whitney U ---------------------------------------------------------------

TEST(MannWhitney, HandComputedCompleteSeparation) {
  // No a exceeds any b: U_A = 0, U_B = 9. Of the C(6, 3) = 20 equally likely
  // orderings exactly one has U_A = 0 and one U_A = 9: p = 2/20.
  const auto r = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_DOUBLE_EQ(r.u_a, 0);
  EXPECT_DOUBLE_EQ(r.u_b, 9);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.p_value, 0.1);
  EXPECT_DOUBLE_EQ(r.p_a_greater, 0);
}

TEST(MannWhitney, HandComputedInterleaved) {
  // a > b pairs: 3>2, 5>2, 5>4 -> U_A = 3. For sizes 3, 3 the counts of
  // U = 0..9 are 1 1 2 3 3 3 3 2 1 1, so P(U >= 6) = 7/20 and p = 0.7.
  const auto r = mann_whitney_u({1, 3, 5}, {2, 4, 6});
  EXPECT_DOUBLE_EQ(r.u_a, 3);
  EXPECT_DOUBLE_EQ(r.u_b, 6);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.p_value, 0.7);
  EXPECT_DOUBLE_EQ(r.p_a_greater, 3.0 / 9.0);
}

// Reference values: SciPy 1.17.1,
// scipy.stats.mannwhitneyu(a, b, alternative='two-sided', method='exact').
TEST(MannWhitney, ExactMatchesScipy) {
  {
    const auto r = mann_whitney_u({10.2, 11.5, 9.8, 10.9, 12.1, 10.4, 11.0},
                                  {11.8, 12.4, 10.6, 13.0, 12.9, 11.3, 12.2, 13.5, 10.1});
    EXPECT_TRUE(r.exact);
    EXPECT_DOUBLE_EQ(r.u_a, 13);
    EXPECT_NEAR(r.p_value, 0.0548951048951049, 1e-15);
  }
  {
    const auto r =
        mann_whitney_u({101.3, 99.8, 100.4, 102.1, 98.9, 100.9, 101.7, 99.5, 100.1, 103.0},
                       {102.6, 101.9, 104.2, 100.7, 103.3, 102.2, 105.1, 101.4, 103.8, 102.9});
    EXPECT_TRUE(r.exact);
    EXPECT_DOUBLE_EQ(r.u_a, 13);
    EXPECT_NEAR(r.p_value, 0.003886206672584382, 1e-15);
  }
  {
    // a = 1.25, 2.25, ..., 20.25; b = 4.5, 5.5, ..., 23.5 (the largest exact case)
    std::vector<double> a, b;
    for (int i = 0; i < 20; ++i) {
      a.push_back(1.25 + i);
      b.push_back(4.5 + i);
    }
    const auto r = mann_whitney_u(a, b);
    EXPECT_TRUE(r.exact);
    EXPECT_DOUBLE_EQ(r.u_a, 136);
    EXPECT_NEAR(r.p_value, 0.0859140199856938, 1e-14);
  }
}

// Reference values: SciPy 1.17.1,
// scipy.stats.mannwhitneyu(a, b, alternative='two-sided', method='asymptotic')
// (tie correction and continuity correction on, its defaults).
TEST(MannWhitney, NormalApproximationWithTiesMatchesScipy) {
  {
    const auto r = mann_whitney_u({1, 2, 2, 3, 4, 4, 4, 5}, {3, 4, 5, 5, 6, 6, 7});
    EXPECT_FALSE(r.exact);  // ties
    EXPECT_DOUBLE_EQ(r.u_a, 8);
    EXPECT_NEAR(r.p_value, 0.021920655864769517, 1e-14);
  }
  {
    const auto r = mann_whitney_u({100, 100, 200}, {200, 200, 200, 300});
    EXPECT_FALSE(r.exact);
    EXPECT_DOUBLE_EQ(r.u_a, 1.5);
    EXPECT_NEAR(r.p_value, 0.11465264168449484, 1e-14);
  }
  {
    // 25 and 30 values with ties between the sides.
    const std::vector<double> a{1.0,   1.03,  0.973, 0.915, 0.956, 0.906, 1.006, 1.143, 0.952,
                                0.94,  1.05,  1.036, 1.011, 0.911, 0.997, 1.072, 0.874, 0.955,
                                0.827, 0.879, 0.832, 0.977, 0.881, 1.027, 1.016};
    const std::vector<double> b{1.032, 0.817, 0.996, 1.046, 1.063, 0.902, 1.002, 0.953,
                                0.97,  1.169, 0.97,  1.048, 1.148, 0.992, 1.04,  1.063,
                                1.058, 0.93,  1.059, 1.204, 0.901, 1.146, 1.064, 0.986,
                                1.284, 1.135, 0.932, 1.059, 1.114, 1.032};
    const auto r = mann_whitney_u(a, b);
    EXPECT_FALSE(r.exact);
    EXPECT_DOUBLE_EQ(r.u_a, 213);
    EXPECT_NEAR(r.p_value, 0.006332563805538762, 1e-14);
  }
}

TEST(MannWhitney, NoTiesBeyondExactSizeUsesNormalApproximation) {
  // SciPy 1.17.1, method='asymptotic', same inputs.
  std::vector<double> a, b;
  for (int i = 0; i < 21; ++i) {
    a.push_back(1.0 + 0.5 * i);
    b.push_back(1.75 + 0.5 * i);
  }
  const auto r = mann_whitney_u(a, b);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u_a, 190);
  EXPECT_NEAR(r.p_value, 0.4504456875848739, 1e-14);

  // One side small, the other above the exact limit: still asymptotic.
  std::vector<double> c;
  for (int i = 0; i < 25; ++i) c.push_back(2.0 + i * 1.1);
  const auto s = mann_whitney_u({3, 7, 1, 9, 5}, c);
  EXPECT_FALSE(s.exact);
  EXPECT_DOUBLE_EQ(s.u_a, 16);
  EXPECT_NEAR(s.p_value, 0.010472075424016793, 1e-14);
}

TEST(MannWhitney, SwappingSidesSwapsUAndKeepsP) {
  const std::vector<double> a{10.2, 11.5, 9.8, 10.9, 12.1, 10.4, 11.0};
  const std::vector<double> b{11.8, 12.4, 10.6, 13.0, 12.9, 11.3, 12.2, 13.5, 10.1};
  const auto ab = mann_whitney_u(a, b);
  const auto ba = mann_whitney_u(b, a);
  EXPECT_DOUBLE_EQ(ab.u_a, ba.u_b);
  EXPECT_DOUBLE_EQ(ab.u_b, ba.u_a);
  EXPECT_DOUBLE_EQ(ab.p_value, ba.p_value);
}

TEST(MannWhitney, AllValuesEqualGiveNoEvidence) {
  const auto r = mann_whitney_u({5, 5, 5}, {5, 5, 5, 5});
  EXPECT_DOUBLE_EQ(r.u_a, 6);
  EXPECT_DOUBLE_EQ(r.p_value, 1);
}

TEST(MannWhitney, InvalidInputThrows) {
  EXPECT_THROW_MSG((void)mann_whitney_u({}, {1}), Error, "side A has no values");
  EXPECT_THROW_MSG((void)mann_whitney_u({1}, {}), Error, "side B has no values");
  EXPECT_THROW_MSG((void)mann_whitney_u({1, NAN}, {1}), Error,
                   "side A has a value that is not finite (nan)");
  EXPECT_THROW_MSG((void)mann_whitney_u({1}, {INFINITY}), Error,
                   "side B has a value that is not finite (inf)");
}

// --- bootstrap ----------------------------------------------------------------------

const std::vector<double> kSideA{100.3, 99.1, 101.8, 100.0, 98.7, 102.4, 100.9, 99.6, 101.2, 100.5};
const std::vector<double> kSideB{104.9, 103.2, 106.1, 105.0, 102.8, 107.3, 104.4, 103.9, 105.6, 104.1};

TEST(Bootstrap, PointEstimateIsRatioOfMedians) {
  const auto r = bootstrap_median_ratio(kSideA, kSideB);
  EXPECT_DOUBLE_EQ(r.ratio, runner::store::median(kSideB) / runner::store::median(kSideA));
  EXPECT_DOUBLE_EQ(r.confidence, 0.95);
  EXPECT_LE(r.lower, r.ratio);
  EXPECT_GE(r.upper, r.ratio);
}

TEST(Bootstrap, SameSeedGivesIdenticalInterval) {
  BootstrapOptions o;
  o.seed = 42;
  const auto r1 = bootstrap_median_ratio(kSideA, kSideB, o);
  const auto r2 = bootstrap_median_ratio(kSideA, kSideB, o);
  EXPECT_EQ(r1.lower, r2.lower);  // bit-identical, not merely close
  EXPECT_EQ(r1.upper, r2.upper);
}

TEST(Bootstrap, DifferentSeedGivesCloseButDifferentInterval) {
  BootstrapOptions o1, o2;
  o1.seed = 1;
  o2.seed = 2;
  const auto r1 = bootstrap_median_ratio(kSideA, kSideB, o1);
  const auto r2 = bootstrap_median_ratio(kSideA, kSideB, o2);
  EXPECT_TRUE(r1.lower != r2.lower || r1.upper != r2.upper);
  // Monte Carlo error of a 2.5% quantile from 10000 resamples is far below 0.5%.
  EXPECT_NEAR(r1.lower, r2.lower, 0.005);
  EXPECT_NEAR(r1.upper, r2.upper, 0.005);
  EXPECT_EQ(r1.ratio, r2.ratio);
}

TEST(Bootstrap, ConstantSidesGiveADegenerateInterval) {
  const auto r = bootstrap_median_ratio({2, 2, 2, 2, 2}, {3, 3, 3, 3, 3});
  EXPECT_DOUBLE_EQ(r.ratio, 1.5);
  EXPECT_DOUBLE_EQ(r.lower, 1.5);
  EXPECT_DOUBLE_EQ(r.upper, 1.5);
}

TEST(Bootstrap, IntervalContainsTheTrueRatio) {
  // Lognormal sides with medians 10 and 11: the true ratio of medians is 1.1.
  Noise noise(2024);
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) a.push_back(10 * std::exp(0.05 * noise.normal()));
  for (int i = 0; i < 30; ++i) b.push_back(11 * std::exp(0.05 * noise.normal()));
  const auto r = bootstrap_median_ratio(a, b);
  EXPECT_LT(r.lower, 1.1);
  EXPECT_GT(r.upper, 1.1);
  EXPECT_GT(r.lower, 1.0);  // and excludes "no change"
}

TEST(Bootstrap, CoverageOfTheTrueRatio) {
  // How often the 95% interval contains the true ratio (1.05) at 10 runs per
  // side. The percentile bootstrap of a median can undercover at small n
  // (it is discrete there); this checks that on the realistic workload it
  // stays close to nominal.
  Workload w;
  int covered = 0;
  const int trials = 300;
  for (int t = 0; t < trials; ++t) {
    Noise noise(900000 + static_cast<std::uint64_t>(t));
    const auto a = simulate_runs(noise, w, 10, 1.0);
    const auto b = simulate_runs(noise, w, 10, 1.05);
    const auto r = bootstrap_median_ratio(a, b);
    if (r.lower <= 1.05 && 1.05 <= r.upper) ++covered;
  }
  const double coverage = static_cast<double>(covered) / trials;
  std::printf("[ coverage ] 95%% bootstrap interval, 10 runs per side: %.1f%% of %d trials\n",
              100 * coverage, trials);
  EXPECT_GE(coverage, 0.85);
}

TEST(Bootstrap, InvalidInputThrows) {
  EXPECT_THROW_MSG((void)bootstrap_median_ratio({}, {1}), Error, "side A has no values");
  EXPECT_THROW_MSG((void)bootstrap_median_ratio({1}, {}), Error, "side B has no values");
  EXPECT_THROW_MSG((void)bootstrap_median_ratio({1, 0}, {1}), Error,
                   "side A has a value that is not positive (0): a ratio of medians needs "
                   "positive values");
  EXPECT_THROW_MSG((void)bootstrap_median_ratio({1}, {-2.5}), Error,
                   "side B has a value that is not positive (-2.5): a ratio of medians needs "
                   "positive values");
  BootstrapOptions few;
  few.iterations = 99;
  EXPECT_THROW_MSG((void)bootstrap_median_ratio({1}, {1}, few), Error,
                   "bootstrap iterations must be at least 100, got 99");
  BootstrapOptions level;
  level.confidence = 1;
  EXPECT_THROW_MSG((void)bootstrap_median_ratio({1}, {1}, level), Error,
                   "bootstrap confidence must be in (0, 1), got 1");
}

// --- verdict ------------------------------------------------------------------------

TEST(Verdict, SlowerTimeAndFasterThroughput) {
  const auto time = compare_samples(kSideA, kSideB, Direction::lower_is_better);
  EXPECT_TRUE(time.test.exact);
  EXPECT_LT(time.test.p_value, 0.001);
  EXPECT_GT(time.ratio.lower, 1.0);
  EXPECT_TRUE(time.significant);
  EXPECT_EQ(time.verdict, Verdict::slower);
  EXPECT_TRUE(time.reliable);
  EXPECT_EQ(time.warning, "");
  EXPECT_EQ(time.n_a, 10U);
  EXPECT_DOUBLE_EQ(time.median_a, runner::store::median(kSideA));
  ASSERT_TRUE(time.cv_a.has_value());

  // The same numbers read as throughput: B is higher, so better.
  const auto throughput = compare_samples(kSideA, kSideB, Direction::higher_is_better);
  EXPECT_EQ(throughput.verdict, Verdict::faster);
  // And the sides swapped.
  EXPECT_EQ(compare_samples(kSideB, kSideA, Direction::lower_is_better).verdict, Verdict::faster);
  EXPECT_EQ(compare_samples(kSideB, kSideA, Direction::higher_is_better).verdict, Verdict::slower);
}

TEST(Verdict, OverlappingSidesAreNoSignificantDifference) {
  const auto c = compare_samples(kSideA, {100.1, 99.3, 101.5, 100.2, 98.9, 102.0, 100.7, 99.9, 101.0,
                                          100.4},
                                 Direction::lower_is_better);
  EXPECT_GE(c.test.p_value, 0.05);
  EXPECT_FALSE(c.significant);
  EXPECT_EQ(c.verdict, Verdict::no_significant_difference);
}

TEST(Verdict, NeedsTheIntervalToExcludeOne) {
  // A = 101..120. B has 11 values packed just below A's median and 9 far
  // above everything: B ranks higher overall (the test says p < 0.05), yet
  // both medians are about 110.5, so the interval of the ratio contains 1 and
  // the rule does not call a difference.
  std::vector<double> a, b;
  for (int i = 1; i <= 20; ++i) a.push_back(100 + i);
  for (int k = 0; k <= 10; ++k) b.push_back(109.1 + 0.1 * k);
  for (int k = 1; k <= 9; ++k) b.push_back(200 + k);
  const auto c = compare_samples(a, b, Direction::lower_is_better);
  EXPECT_LT(c.test.p_value, 0.05);
  EXPECT_NEAR(c.ratio.ratio, 1.0, 0.01);
  EXPECT_LE(c.ratio.lower, 1.0);
  EXPECT_GE(c.ratio.upper, 1.0);
  EXPECT_FALSE(c.significant);
  EXPECT_EQ(c.verdict, Verdict::no_significant_difference);
}

TEST(Verdict, FewerThanFiveRepetitionsAreFlaggedButStillJudged) {
  // Complete separation of 4 vs 4: exact p = 2/70 < 0.05 and the interval
  // excludes 1, so the verdict is computed, and flagged.
  const auto c = compare_samples({10, 10.1, 10.2, 10.3}, {11, 11.1, 11.2, 11.3},
                                 Direction::lower_is_better);
  EXPECT_NEAR(c.test.p_value, 2.0 / 70.0, 1e-15);
  EXPECT_EQ(c.verdict, Verdict::slower);
  EXPECT_FALSE(c.reliable);
  EXPECT_EQ(c.warning, "fewer than 5 repetitions per side: the result is unreliable");
  // One short side is enough to flag it.
  EXPECT_FALSE(compare_samples(kSideA, {11, 11.1, 11.2, 11.3}, Direction::lower_is_better).reliable);
  // Five per side is reliable.
  const auto five = compare_samples({10, 10.1, 10.2, 10.3, 10.4}, {11, 11.1, 11.2, 11.3, 11.4},
                                    Direction::lower_is_better);
  EXPECT_TRUE(five.reliable);
  EXPECT_EQ(five.warning, "");
}

TEST(Verdict, NamesAndInvalidOptions) {
  EXPECT_EQ(runner::store::verdict_name(Verdict::faster), "faster");
  EXPECT_EQ(runner::store::verdict_name(Verdict::slower), "slower");
  EXPECT_EQ(runner::store::verdict_name(Verdict::no_significant_difference),
            "no significant difference");
  CompareOptions o;
  o.alpha = 0;
  EXPECT_THROW_MSG((void)compare_samples(kSideA, kSideB, Direction::lower_is_better, o), Error,
                   "alpha must be in (0, 1), got 0");
  EXPECT_THROW_MSG((void)compare_samples({}, kSideB, Direction::lower_is_better), Error,
                   "side A has no values");
  EXPECT_THROW_MSG((void)compare_samples(kSideA, {}, Direction::lower_is_better), Error,
                   "side B has no values");
}

// --- regression gate -----------------------------------------------------------------

TEST(Regression, TimeRatioLowerBoundAboveThreshold) {
  // B is ~4.5% slower; the interval's lower bound is between 1.02 and 1.05.
  const auto c = compare_samples(kSideA, kSideB, Direction::lower_is_better);
  ASSERT_GT(c.ratio.lower, 1.02);
  ASSERT_LT(c.ratio.lower, 1.05);
  EXPECT_TRUE(regression_beyond(c, 0));
  EXPECT_TRUE(regression_beyond(c, 2));
  EXPECT_FALSE(regression_beyond(c, 5));
  // B faster than A is never a regression.
  EXPECT_FALSE(regression_beyond(compare_samples(kSideB, kSideA, Direction::lower_is_better), 0));
}

TEST(Regression, ThroughputRatioUpperBoundBelowThreshold) {
  // Throughput fell: A high, B low; the upper bound is between 0.95 and 0.98.
  const auto c = compare_samples(kSideB, kSideA, Direction::higher_is_better);
  ASSERT_EQ(c.verdict, Verdict::slower);
  ASSERT_LT(c.ratio.upper, 0.98);
  ASSERT_GT(c.ratio.upper, 0.95);
  EXPECT_TRUE(regression_beyond(c, 2));
  EXPECT_FALSE(regression_beyond(c, 5));
  EXPECT_FALSE(regression_beyond(compare_samples(kSideA, kSideB, Direction::higher_is_better), 0));
}

TEST(Regression, NeedsSignificance) {
  // A large ratio from two noisy runs per side is not significant.
  const auto c = compare_samples({10, 12}, {15, 18}, Direction::lower_is_better);
  EXPECT_GT(c.ratio.ratio, 1.4);
  EXPECT_EQ(c.verdict, Verdict::no_significant_difference);
  EXPECT_FALSE(regression_beyond(c, 10));
}

TEST(Regression, InvalidThresholdThrows) {
  const auto time = compare_samples(kSideA, kSideB, Direction::lower_is_better);
  EXPECT_THROW_MSG((void)regression_beyond(time, -1), Error,
                   "regression threshold must be at least 0 percent, got -1");
  EXPECT_TRUE(regression_beyond(time, 0));
  const auto tput = compare_samples(kSideB, kSideA, Direction::higher_is_better);
  EXPECT_THROW_MSG((void)regression_beyond(tput, 100), Error,
                   "regression threshold of a higher-is-better metric must be below 100 percent, "
                   "got 100");
}

// --- fingerprint diff ------------------------------------------------------------------

TEST(FingerprintDiff, DiffClassifiesKeys) {
  const std::map<std::string, std::string> a{
      {"host.hostname", "box-1"},  {"host.kernel", "Linux 6.1"},   {"cpu.model", "Xeon 8375C"},
      {"cpu.governor", "performance"}, {"threads.intra_op", "8"},  {"software.git_commit", "abc"},
      {"seed", "1"},               {"env.OMP_NUM_THREADS", "8"},   {"gpu.name", ""},
      {"software.torch_version", "2.5.1"}};
  const std::map<std::string, std::string> b{
      {"host.hostname", "box-2"},  {"host.kernel", "Linux 6.1"},   {"cpu.model", "Xeon 8375C"},
      {"cpu.governor", "powersave"}, {"threads.intra_op", "4"},    {"software.git_commit", "def"},
      {"seed", "2"},               {"gpu.name", ""},               {"software.torch_version", "2.5.1"},
      {"flags.cudnn_benchmark", "true"}, {"future.key", "x"}};
  const auto d = runner::store::diff_fingerprints(a, b);
  ASSERT_FALSE(d.empty());

  std::vector<std::string> matters, benign;
  for (const auto& x : d.matters) matters.push_back(x.key);
  for (const auto& x : d.benign) benign.push_back(x.key);
  EXPECT_EQ(matters, (std::vector<std::string>{"cpu.governor", "env.OMP_NUM_THREADS",
                                               "flags.cudnn_benchmark", "future.key",
                                               "threads.intra_op"}));
  EXPECT_EQ(benign, (std::vector<std::string>{"host.hostname", "seed", "software.git_commit"}));

  // Values, and absence on one side.
  EXPECT_EQ(d.matters[0].a, "performance");
  EXPECT_EQ(d.matters[0].b, "powersave");
  EXPECT_EQ(d.matters[1].a, "8");
  EXPECT_FALSE(d.matters[1].b.has_value());  // OMP_NUM_THREADS unset on B
  EXPECT_FALSE(d.matters[2].a.has_value());
  EXPECT_EQ(d.matters[2].b, "true");
}

TEST(FingerprintDiff, KeyClassification) {
  using runner::store::fingerprint_key_matters;
  for (const char* key :
       {"cpu.model", "cpu.isa", "cpu.caches", "cpu.governor", "cpu.logical_cores",
        "cpu.physical_cores", "memory.total", "gpu.driver", "gpu.name", "software.torch_version",
        "software.torch_config", "software.torch_parallel", "software.compiler",
        "software.build_type", "software.cuda_code_paths", "software.cxx11_abi",
        "threads.inter_op", "flags.float32_matmul_precision", "env.LD_PRELOAD", "host.kernel",
        "host.os", "host.arch"})
    EXPECT_TRUE(fingerprint_key_matters(key)) << key;
  for (const char* key : {"host.hostname", "software.git_commit", "software.git_dirty",
                          "software.runner_version", "seed"})
    EXPECT_FALSE(fingerprint_key_matters(key)) << key;
}

TEST(FingerprintDiff, IdenticalFingerprintsHaveNoDiff) {
  const std::map<std::string, std::string> a{{"cpu.model", "x"}, {"seed", "1"}};
  EXPECT_TRUE(runner::store::diff_fingerprints(a, a).empty());
  EXPECT_TRUE(runner::store::diff_fingerprints({}, {}).empty());
}

// --- simulations: the rule's error rates ------------------------------------------------

// Runs per side that docs/method.md recommends for detecting a 5% change at a
// 2% run-to-run coefficient of variation.
constexpr int kRecommendedRuns = 5;

TEST(Simulation, AAFalseAlarmRateIsAtMostNominal) {
  // Both sides from the same distribution, 10 runs each, 1000 comparisons.
  // With alpha = 0.05 at most 5% may differ; 8% leaves a binomial margin
  // (5% + 4 standard errors of sqrt(0.05 * 0.95 / 1000) = 0.69%).
  const auto r = simulate(Workload{}, 10, 1.0, 1000, 1000);
  const double rate = r.rate(r.faster + r.slower);
  std::printf("[ A/A ] 10 runs per side, run-to-run CV %.2f%%: false alarms %.1f%% "
              "(%d faster, %d slower of %d)\n",
              100 * r.mean_cv, 100 * rate, r.faster, r.slower, r.trials);
  EXPECT_GT(r.mean_cv, 0.015);  // the workload is as noisy as docs/method.md says
  EXPECT_LT(r.mean_cv, 0.025);
  EXPECT_LE(rate, 0.08);
}

TEST(Simulation, AAWithDisturbedRunsStaysAtNominal) {
  // Heavier tails: 10% of runs are 8% slower (a noisy neighbour). Rank tests
  // and medians should not be fooled into more false alarms.
  Workload w;
  w.outlier_run_probability = 0.1;
  const auto r = simulate(w, 10, 1.0, 500, 5000);
  const double rate = r.rate(r.faster + r.slower);
  std::printf("[ A/A ] 10 runs per side with 10%% disturbed runs: false alarms %.1f%% "
              "(%d faster, %d slower of %d)\n",
              100 * rate, r.faster, r.slower, r.trials);
  EXPECT_LE(rate, 0.08);
}

TEST(Simulation, PowerAtRecommendedRepetitions) {
  // B is 5% slower. At the recommended runs per side, at least 80% of 500
  // trials must say "slower" and none "faster"; one run fewer must not reach
  // 80%, so the recommendation is the smallest that does.
  const auto at = simulate(Workload{}, kRecommendedRuns, 1.05, 500, 20000);
  const auto below = simulate(Workload{}, kRecommendedRuns - 1, 1.05, 500, 20000);
  std::printf("[ power ] 5%% slowdown, run-to-run CV %.2f%%: %d runs per side detect %.1f%% "
              "(wrong sign %.1f%%); %d runs detect %.1f%%\n",
              100 * at.mean_cv, kRecommendedRuns, 100 * at.rate(at.slower), 100 * at.rate(at.faster),
              kRecommendedRuns - 1, 100 * below.rate(below.slower));
  EXPECT_GE(at.rate(at.slower), 0.80);
  EXPECT_EQ(at.faster, 0);
  EXPECT_LT(below.rate(below.slower), 0.80);
}

TEST(Simulation, RegressionGate) {
  // `--fail-above 5` at the recommended runs: a true 10% slowdown must trip
  // it in most trials (about 4 in 5), a true 5% one rarely (the whole interval
  // must lie beyond 5%), and an A/A comparison practically never.
  auto gate_rate = [](double b_scale, std::uint64_t seed_base) {
    int fired = 0;
    const int trials = 300;
    for (int t = 0; t < trials; ++t) {
      Noise noise(seed_base + static_cast<std::uint64_t>(t));
      const auto a = simulate_runs(noise, Workload{}, kRecommendedRuns, 1.0);
      const auto b = simulate_runs(noise, Workload{}, kRecommendedRuns, b_scale);
      if (regression_beyond(compare_samples(a, b, Direction::lower_is_better), 5)) ++fired;
    }
    return static_cast<double>(fired) / trials;
  };
  const double at10 = gate_rate(1.10, 70000);
  const double at5 = gate_rate(1.05, 71000);
  const double at0 = gate_rate(1.00, 72000);
  std::printf("[ gate ] --fail-above 5, %d runs per side: fires on a 10%% slowdown %.1f%%, "
              "on 5%% %.1f%%, on none %.1f%%\n",
              kRecommendedRuns, 100 * at10, 100 * at5, 100 * at0);
  EXPECT_GE(at10, 0.75);
  EXPECT_LE(at5, 0.10);
  EXPECT_LE(at0, 0.01);
}

}  // namespace

// --- practical equivalence and the schedule check ----------------------------------

namespace {

using runner::store::check_schedule;
using runner::store::noise_margin_pct;
using runner::store::Practical;
using runner::store::practical_name;
using runner::store::practical_verdict;
using runner::store::robust_variation;
using runner::store::TimedValue;

// A comparison with a given interval, for the verdict rule alone.
Comparison with_interval(double lower, double upper, bool significant, Direction direction) {
  Comparison c;
  c.direction = direction;
  c.ratio.lower = lower;
  c.ratio.upper = upper;
  c.ratio.ratio = (lower + upper) / 2;
  c.significant = significant;
  return c;
}

}  // namespace

TEST(PracticalVerdict, CallsADifferenceOnlyBeyondTheMargin) {
  const auto time = Direction::lower_is_better;
  const auto tput = Direction::higher_is_better;
  // Significant and the whole interval beyond 1 + 2 %: slower (time), faster (throughput).
  EXPECT_EQ(practical_verdict(with_interval(1.03, 1.08, true, time), 2), Practical::slower);
  EXPECT_EQ(practical_verdict(with_interval(1.03, 1.08, true, tput), 2), Practical::faster);
  EXPECT_EQ(practical_verdict(with_interval(0.90, 0.97, true, time), 2), Practical::faster);
  // Significant, but the interval reaches into the margin: not called.
  EXPECT_EQ(practical_verdict(with_interval(1.005, 1.03, true, time), 2), Practical::undecided);
  // Significant and small: equivalent within the margin.
  EXPECT_EQ(practical_verdict(with_interval(1.004, 1.012, true, time), 2), Practical::equivalent);
  // Not significant: never faster or slower, however far the interval reaches.
  EXPECT_EQ(practical_verdict(with_interval(1.03, 1.08, false, time), 2), Practical::undecided);
  EXPECT_EQ(practical_verdict(with_interval(0.99, 1.01, false, time), 2), Practical::equivalent);
  EXPECT_EQ(practical_verdict(with_interval(0.8, 1.3, false, time), 2), Practical::undecided);
  // A margin of 0 is the statistical verdict.
  EXPECT_EQ(practical_verdict(with_interval(1.001, 1.002, true, time), 0), Practical::slower);
  EXPECT_THROW_MSG(static_cast<void>(practical_verdict(with_interval(1, 1, false, time), -1)), Error,
                   "the margin must be at least 0 percent, got -1");
}

TEST(PracticalVerdict, NamesTheMargin) {
  EXPECT_EQ(practical_name(Practical::equivalent, 1.25), "equivalent within +/-1.2%");
  EXPECT_EQ(practical_name(Practical::undecided, 3), "undecided (CI crosses +/-3.0%)");
  EXPECT_EQ(practical_name(Practical::slower, 3), "slower");
}

TEST(PracticalVerdict, TheDefaultMarginIsTheRobustNoiseOfBothSides) {
  // One disturbed run moves the CV a lot and the robust spread little.
  const std::vector<double> steady{100, 101, 99, 100, 102, 98};
  std::vector<double> disturbed = steady;
  disturbed[2] = 140;
  EXPECT_GT(*runner::store::coefficient_of_variation(disturbed), 0.14);
  EXPECT_LT(*robust_variation(disturbed), 0.025);
  EXPECT_NEAR(*robust_variation(steady), 1.4826 * 1.0 / 100.0, 1e-12);
  const Comparison c = compare_samples(steady, disturbed, Direction::lower_is_better);
  const double ra = *c.robust_a, rb = *c.robust_b;
  EXPECT_NEAR(noise_margin_pct(c), 100 * std::sqrt((ra * ra + rb * rb) / 2), 1e-12);
  // Identical runs: the floor.
  const std::vector<double> flat(6, 5.0);
  EXPECT_EQ(noise_margin_pct(compare_samples(flat, flat, Direction::lower_is_better)),
            runner::store::kMinMarginPct);
  EXPECT_FALSE(robust_variation({1.0}).has_value());
}

TEST(ScheduleCheck, TellsBlocksFromInterleavedRuns) {
  std::vector<TimedValue> a, b;
  for (int i = 0; i < 6; ++i) {
    a.push_back({static_cast<double>(i), 100});
    b.push_back({static_cast<double>(10 + i), 100});
  }
  auto check = check_schedule(a, b);
  EXPECT_EQ(check.segments, 2u);
  EXPECT_EQ(check.interleaving, 0);
  EXPECT_TRUE(check.separate_blocks);
  EXPECT_DOUBLE_EQ(check.gap_s, 10);
  // A1 B1 A2 B2 ...: interleaved; A started first in 21 of the 36 pairs
  // (7/12), so 1 - |2 * 7/12 - 1| = 5/6, the (n - 1) / n of rounds.
  for (int i = 0; i < 6; ++i) b[i].start_s = i + 0.5;
  check = check_schedule(a, b);
  EXPECT_EQ(check.segments, 12u);
  EXPECT_DOUBLE_EQ(check.interleaving, 5.0 / 6);
  EXPECT_FALSE(check.separate_blocks);
  // Half alternating, then each side in a block: a0 b0 a1 b1 a2 b2 | a3-a5 | b3-b5:
  // A first in 24 of 36 pairs, 1 - |48/36 - 1| = 2/3.
  for (int i = 3; i < 6; ++i) b[i].start_s = 20 + i;
  check = check_schedule(a, b);
  EXPECT_EQ(check.segments, 8u);
  EXPECT_DOUBLE_EQ(check.interleaving, 2.0 / 3);
  EXPECT_FALSE(check.separate_blocks);
  // Two alternations, then blocks: A first in 31 of 36 pairs, mostly separate.
  for (int i = 1; i < 6; ++i) b[i].start_s = 20 + i;
  check = check_schedule(a, b);
  EXPECT_EQ(check.segments, 4u);
  EXPECT_TRUE(check.separate_blocks);
  EXPECT_THROW_MSG(static_cast<void>(check_schedule({}, b)), Error,
                   "check_schedule: each side needs at least one run");
}

TEST(ScheduleCheck, MeasuresTheDriftWithinTheSidesAndCarriesItOverTheGap) {
  // The machine slows by 1 % per second: A runs at t = 0..5, B at t = 10..15,
  // the same code. Within each side the trend is +5 % over its 5 s; carried
  // over the 10 s between the blocks' centres it makes B/A about +10 %.
  std::vector<TimedValue> a, b;
  for (int i = 0; i < 6; ++i) {
    a.push_back({static_cast<double>(i), 100 * (1 + 0.01 * i)});
    b.push_back({static_cast<double>(10 + i), 100 * (1 + 0.01 * (10 + i))});
  }
  const auto check = check_schedule(a, b);
  ASSERT_TRUE(check.drift_a_pct && check.drift_b_pct && check.gap_drift_pct);
  EXPECT_NEAR(*check.drift_a_pct, 5.0 * 100 / 102.5, 0.1);  // relative to A's median
  EXPECT_NEAR(*check.drift_b_pct, 5.0 * 100 / 112.5, 0.1);
  EXPECT_NEAR(*check.gap_drift_pct, 10 * (100 / 102.5 + 100 / 112.5) / 2, 0.5);
  EXPECT_DOUBLE_EQ(check.span_a_s, 5);
  // Fewer than 3 runs a side: no trend is claimed.
  const auto few = check_schedule({a[0], a[1]}, {b[0], b[1]});
  EXPECT_FALSE(few.drift_a_pct.has_value());
  EXPECT_FALSE(few.gap_drift_pct.has_value());
}

// --- what a sample size can decide, and metrics without spread (issue 35) -----------

namespace {

using runner::store::least_runs_per_side;
using runner::store::practical_text;
using runner::store::sample_size_limit;
using runner::store::smallest_two_sided_p;
using runner::store::UndecidedReason;

}  // namespace

TEST(SampleSize, SmallestTwoSidedPIsTwoOverTheOrderings) {
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(3, 3), 0.1);        // 2 / C(6, 3)
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(4, 4), 2.0 / 70);   // 2 / C(8, 4)
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(3, 4), 2.0 / 35);
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(4, 3), 2.0 / 35);
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(3, 5), 2.0 / 56);
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(2, 2), 1.0 / 3);
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(1, 1), 1);  // 2 / 2
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(1, 20), 2.0 / 21);
  EXPECT_DOUBLE_EQ(smallest_two_sided_p(20, 20), 2.0 / 137846528820.0);
  // It is what the exact test gives when every run of one side beats every run of the other.
  for (std::size_t n_a = 1; n_a <= 8; ++n_a)
    for (std::size_t n_b = 1; n_b <= 8; ++n_b) {
      std::vector<double> a, b;
      for (std::size_t i = 0; i < n_a; ++i) a.push_back(10 + 0.1 * static_cast<double>(i));
      for (std::size_t i = 0; i < n_b; ++i) b.push_back(20 + 0.1 * static_cast<double>(i));
      EXPECT_NEAR(mann_whitney_u(a, b).p_value, smallest_two_sided_p(n_a, n_b), 1e-15)
          << n_a << " vs " << n_b;
    }
}

TEST(SampleSize, LeastRunsPerSideAndTheLimitInWords) {
  EXPECT_EQ(least_runs_per_side(0.05), 4u);
  EXPECT_EQ(least_runs_per_side(0.1), 4u);  // 3 a side gives exactly 0.10, not below
  EXPECT_EQ(least_runs_per_side(0.2), 3u);
  EXPECT_EQ(least_runs_per_side(0.01), 5u);
  EXPECT_THROW_MSG((void)least_runs_per_side(0), Error, "alpha must be in (0, 1), got 0");
  EXPECT_EQ(sample_size_limit(3, 3, 0.05),
            "3 runs a side cannot reach p < 0.05; 4 is the least, 5+ recommended");
  EXPECT_EQ(sample_size_limit(1, 1, 0.05),
            "1 run a side cannot reach p < 0.05; 4 is the least, 5+ recommended");
  EXPECT_EQ(sample_size_limit(3, 4, 0.05),
            "3 and 4 runs cannot reach p < 0.05; 4 a side is the least, 5+ recommended");
  EXPECT_EQ(sample_size_limit(4, 4, 0.01), "4 runs a side cannot reach p < 0.01; 5 is the least");
  EXPECT_EQ(sample_size_limit(4, 4, 0.05), "");
  EXPECT_EQ(sample_size_limit(3, 5, 0.05), "");  // 2/56 < 0.05
  EXPECT_THROW_MSG((void)sample_size_limit(3, 3, 1), Error, "alpha must be in (0, 1), got 1");
}

TEST(SampleSize, TheUndecidedVerdictGivesTheReasonThatApplies) {
  // Issue 35's AMP comparison: bf16 1.85x faster in 3 runs a side, every run
  // apart. The interval lies far beyond the margin; the test cannot go below
  // 0.10, and that is the reason, not the interval.
  const Comparison amp = compare_samples({1.11e9, 1.12e9, 1.10e9}, {0.601e9, 0.598e9, 0.605e9},
                                         Direction::lower_is_better);
  EXPECT_DOUBLE_EQ(amp.smallest_p, 0.1);
  EXPECT_DOUBLE_EQ(amp.test.p_value, 0.1);
  ASSERT_LT(amp.ratio.upper, 1 - 0.014);
  EXPECT_EQ(practical_verdict(amp, 1.4), Practical::undecided);
  EXPECT_EQ(runner::store::undecided_reason(amp, 1.4), UndecidedReason::too_few_runs);
  EXPECT_EQ(practical_text(amp, 1.4),
            "undecided (p = 0.10: 3 runs a side cannot reach p < 0.05; 4 is the least, 5+ "
            "recommended)");
  // The interval really crosses the margin: the old words.
  Comparison crossing = with_interval(0.99, 1.05, false, Direction::lower_is_better);
  crossing.n_a = crossing.n_b = 10;
  crossing.smallest_p = smallest_two_sided_p(10, 10);
  crossing.test.p_value = 0.3;
  EXPECT_EQ(practical_text(crossing, 2), "undecided (CI crosses +/-2.0%)");
  // Beyond the margin, enough runs, but p is not below alpha: say p.
  Comparison weak = with_interval(1.03, 1.08, false, Direction::lower_is_better);
  weak.n_a = weak.n_b = 10;
  weak.smallest_p = smallest_two_sided_p(10, 10);
  weak.test.p_value = 0.07;
  EXPECT_EQ(runner::store::undecided_reason(weak, 2), UndecidedReason::p_not_below_alpha);
  EXPECT_EQ(practical_text(weak, 2), "undecided (p = 0.070, not below 0.05)");
  // Other verdicts keep their names.
  EXPECT_EQ(practical_text(with_interval(1.03, 1.08, true, Direction::lower_is_better), 2), "slower");
  // Ties among 3 runs a side (normal approximation) never make a verdict the
  // exact test could not reach.
  const Comparison tied = compare_samples({1, 1, 1.5}, {2, 2.5, 2.5}, Direction::lower_is_better);
  EXPECT_FALSE(tied.significant);
  EXPECT_EQ(tied.verdict, Verdict::no_significant_difference);
}

TEST(Deterministic, NoSpreadMeansNoTestAndNoInterval) {
  // eval_accuracy with one seed: 0.0859 in every run of A, 0.0625 in every run
  // of B. The rank test saw only ties and said p = 0.047, "worse".
  const Comparison acc = compare_samples({0.0859, 0.0859, 0.0859}, {0.0625, 0.0625, 0.0625},
                                         Direction::higher_is_better);
  EXPECT_NEAR(acc.test.p_value, 0.0465, 1e-3);
  EXPECT_TRUE(acc.deterministic);
  EXPECT_FALSE(acc.significant);
  EXPECT_EQ(acc.verdict, Verdict::slower);  // the exact difference's sign
  EXPECT_DOUBLE_EQ(acc.ratio.ratio, 0.0625 / 0.0859);
  EXPECT_EQ(practical_verdict(acc, 1), Practical::differs);
  EXPECT_EQ(practical_text(acc, 1), "differs (the same value in every run)");
  const Comparison same = compare_samples({2.3, 2.3}, {2.3, 2.3, 2.3}, Direction::lower_is_better);
  EXPECT_TRUE(same.deterministic);
  EXPECT_EQ(same.verdict, Verdict::no_significant_difference);
  EXPECT_EQ(practical_text(same, 1), "same (the same value in every run)");
  // A spread on one side, or one run a side (whose spread is unknown): the test applies.
  EXPECT_FALSE(compare_samples({2.3, 2.3, 2.3}, {2.2, 2.3, 2.4}, Direction::lower_is_better).deterministic);
  EXPECT_FALSE(compare_samples({2.3}, {2.4}, Direction::lower_is_better).deterministic);
}

TEST(Deterministic, TheGateReadsTheExactRatio) {
  // A 10 % slower headline in every run: no interval to clear, the ratio is exact.
  const Comparison time = compare_samples({100, 100, 100}, {110, 110, 110}, Direction::lower_is_better);
  ASSERT_TRUE(time.deterministic);
  EXPECT_TRUE(regression_beyond(time, 5));
  EXPECT_FALSE(regression_beyond(time, 10));
  EXPECT_FALSE(regression_beyond(compare_samples({110, 110}, {100, 100}, Direction::lower_is_better), 0));
  const Comparison tput = compare_samples({100, 100}, {80, 80}, Direction::higher_is_better);
  EXPECT_TRUE(regression_beyond(tput, 15));
  EXPECT_FALSE(regression_beyond(tput, 20));
}

TEST(SampleSize, TheMethodPageTableIsTheFunction) {
  // docs/method.md's "runs per side -> smallest two-sided p" table, row by
  // row, against smallest_two_sided_p printed to two significant digits.
  std::ifstream doc(RUNNER_SOURCE_DIR "/docs/method.md");
  ASSERT_TRUE(doc) << "docs/method.md";
  bool in_table = false;
  std::size_t expected_n = 2;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| runs per side | smallest two-sided p |", 0) == 0) in_table = true;
    if (!in_table || line.rfind("| ", 0) != 0 || line.rfind("| runs", 0) == 0 ||
        line.rfind("| -", 0) == 0) {
      if (in_table && line.empty()) break;
      continue;
    }
    std::istringstream cells(line);
    std::string bar, p;
    std::size_t n = 0;
    cells >> bar >> n >> bar >> p;
    EXPECT_EQ(n, expected_n) << line;
    char want[32];
    std::snprintf(want, sizeof want, "%#.2g", smallest_two_sided_p(n, n));
    EXPECT_EQ(p, want) << line;
    EXPECT_EQ(line.find("| no |") != std::string::npos, n < least_runs_per_side(0.05)) << line;
    ++expected_n;
  }
  EXPECT_EQ(expected_n, 9u) << "rows for 2..8 runs a side";
}
