// The verdict of one expectation (store/src/statistics/expectation.cpp):
// holds, refuted and undecided on synthetic per-run values, the runs-needed
// estimate, and the seam for another interval.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner::store {
namespace {

// n values spread +-1 % around `center`, the same pattern on every side.
std::vector<double> around(double center, std::size_t n, double spread = 0.01) {
  std::vector<double> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(center * (1 + spread * (2.0 * static_cast<double>(i) / static_cast<double>(n - 1) - 1)));
  return out;
}

constexpr ExpectedBound below(double v) { return {BoundKind::ratio_below, v}; }
constexpr ExpectedBound above(double v) { return {BoundKind::ratio_above, v}; }
constexpr ExpectedBound within(double v) { return {BoundKind::equivalent_within, v}; }

TEST(ExpectationTest, HoldsWhenTheWholeIntervalSatisfiesTheBound) {
  const ExpectationResult r = judge_expectation(around(10, 8), around(4, 8), below(0.5));
  EXPECT_EQ(r.verdict, ExpectationVerdict::holds);
  EXPECT_NEAR(r.ratio.ratio, 0.4, 1e-9);
  EXPECT_LT(r.ratio.upper, 0.5);
  EXPECT_EQ(r.n_a, 8u);
  EXPECT_EQ(r.n_b, 8u);
  EXPECT_FALSE(r.more_runs);
  EXPECT_EQ(expectation_verdict_name(r.verdict), "holds");
}

TEST(ExpectationTest, TheIntervalIsCompares) {
  const auto a = around(10, 6, 0.05), b = around(7, 6, 0.08);
  const RatioInterval compared = compare_samples(a, b, Direction::lower_is_better).ratio;
  const ExpectationResult r = judge_expectation(a, b, below(0.9));
  EXPECT_EQ(r.ratio.ratio, compared.ratio);
  EXPECT_EQ(r.ratio.lower, compared.lower);
  EXPECT_EQ(r.ratio.upper, compared.upper);
}

TEST(ExpectationTest, RefutedWhenTheWholeIntervalViolatesIt) {
  const ExpectationResult r = judge_expectation(around(10, 8), around(8, 8), below(0.5));
  EXPECT_EQ(r.verdict, ExpectationVerdict::refuted);
  EXPECT_GE(r.ratio.lower, 0.5);
  EXPECT_EQ(judge_expectation(around(10, 8), around(12, 8), above(1.5)).verdict,
            ExpectationVerdict::refuted);
  EXPECT_EQ(judge_expectation(around(10, 8), around(20, 8), above(1.5)).verdict,
            ExpectationVerdict::holds);
}

TEST(ExpectationTest, Equivalence) {
  EXPECT_EQ(judge_expectation(around(10, 8), around(10.05, 8), within(0.05)).verdict,
            ExpectationVerdict::holds);
  // 20 % apart with 1 % spread: wholly outside +-5 %.
  EXPECT_EQ(judge_expectation(around(10, 8), around(12, 8), within(0.05)).verdict,
            ExpectationVerdict::refuted);
  EXPECT_EQ(judge_expectation(around(10, 8), around(8, 8), within(0.05)).verdict,
            ExpectationVerdict::refuted);
}

TEST(ExpectationTest, UndecidedWhenTheIntervalCrossesTheBound) {
  // 30 % spread around a ratio of 0.5 against a bound of 0.55.
  const ExpectationResult r = judge_expectation(around(10, 6, 0.3), around(5, 6, 0.3), below(0.55));
  EXPECT_EQ(r.verdict, ExpectationVerdict::undecided);
  EXPECT_LT(r.ratio.lower, 0.55);
  EXPECT_GT(r.ratio.upper, 0.55);
  ASSERT_TRUE(r.more_runs);
  EXPECT_GE(*r.more_runs, 1u);
  EXPECT_EQ(r.reason, "the interval crosses the bound");
}

TEST(ExpectationTest, TooFewRunsAreUndecidedWithTheRunsMissing) {
  EXPECT_EQ(least_runs_for_verdict(0.95), 4u);
  // Three runs a side would satisfy the bound, but cannot decide anything.
  const ExpectationResult r = judge_expectation(around(10, 3), around(4, 3), below(0.5));
  EXPECT_EQ(r.verdict, ExpectationVerdict::undecided);
  EXPECT_EQ(r.more_runs, 1u);
  EXPECT_EQ(r.reason, "3 runs a side: a verdict needs 4");
  const ExpectationResult empty = judge_expectation({}, around(4, 5), below(0.5));
  EXPECT_EQ(empty.verdict, ExpectationVerdict::undecided);
  EXPECT_EQ(empty.more_runs, 4u);
  EXPECT_EQ(empty.reason, "side A has no finished run");
  EXPECT_EQ(empty.n_b, 5u);
}

TEST(ExpectationTest, DeterministicValuesDecideWithTwoRuns) {
  // A memory peak: the same bytes every run; the ratio is exact.
  const ExpectationResult r = judge_expectation({100, 100}, {40, 40}, below(0.5));
  EXPECT_TRUE(r.deterministic);
  EXPECT_EQ(r.verdict, ExpectationVerdict::holds);
  EXPECT_DOUBLE_EQ(r.ratio.lower, 0.4);
  EXPECT_DOUBLE_EQ(r.ratio.upper, 0.4);
}

TEST(ExpectationTest, AnEdgeTouchedIsNotSatisfied) {
  EXPECT_EQ(verdict_of_interval(0.4, 0.5, below(0.5)), ExpectationVerdict::undecided);
  EXPECT_EQ(verdict_of_interval(0.5, 0.6, below(0.5)), ExpectationVerdict::refuted);
  EXPECT_EQ(verdict_of_interval(0.5, 0.6, above(0.5)), ExpectationVerdict::undecided);
  EXPECT_EQ(verdict_of_interval(0.4, 0.5, above(0.5)), ExpectationVerdict::refuted);
  EXPECT_EQ(verdict_of_interval(0.95, 1.05, within(0.05)), ExpectationVerdict::holds);
  // Beyond 100 % the lower edge is gone: anything up to 1 + value holds.
  EXPECT_EQ(verdict_of_interval(0.01, 1.9, within(1.0)), ExpectationVerdict::holds);
}

TEST(ExpectationTest, RunsNeededShrinkTheHalfWidthAsOneOverRootN) {
  // Ratio 0.5, log half-width 0.2 each way, bound at 0.5 * e^0.09: the half
  // width must shrink by 0.2 / 0.09, so (0.2 / 0.09)^2 times the runs: 8 -> 40, 32 more.
  const double r = 0.5, h = 0.2;
  const RatioInterval interval{r, r * std::exp(-h), r * std::exp(h), 0.95};
  EXPECT_EQ(more_runs_per_side(interval, 8, below(r * std::exp(0.09))), 32u);
  // The refuting side of the estimate: the bound below the ratio.
  EXPECT_EQ(more_runs_per_side(interval, 8, below(r * std::exp(-0.09))), 32u);
  // The ratio on the bound: no number of runs is likely to decide.
  EXPECT_FALSE(more_runs_per_side(interval, 8, below(r)));
  // An unbounded interval (a look of the sequential design that spends nothing).
  const RatioInterval open{r, 0, std::numeric_limits<double>::infinity(), 0.95};
  EXPECT_FALSE(more_runs_per_side(open, 8, below(0.6)));
  // Equivalence with the ratio inside: both edges must be cleared, and the
  // nearer one (1.04: log distance 0.039) needs more runs than 0.96 (0.041).
  const RatioInterval near_one{1.0, std::exp(-0.1), std::exp(0.1), 0.95};
  EXPECT_EQ(more_runs_per_side(near_one, 10, within(0.04)), 56u);
}

TEST(ExpectationTest, AnotherIntervalPlugsIn) {
  ExpectationOptions options;
  int calls = 0;
  options.interval = [&](const std::vector<double>&, const std::vector<double>&) {
    ++calls;
    return RatioInterval{0.4, 0.1, 0.9, 0.99};
  };
  const ExpectationResult r = judge_expectation(around(10, 8), around(4, 8), below(0.5), options);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.verdict, ExpectationVerdict::undecided);
  EXPECT_DOUBLE_EQ(r.ratio.upper, 0.9);
}

TEST(ExpectationTest, BadInput) {
  EXPECT_THROW_MSG(static_cast<void>(judge_expectation({1, 2}, {1, 2}, below(0))), Error,
                   "the bound of an expectation must be finite and greater than 0, got 0");
  EXPECT_THROW_MSG(static_cast<void>(judge_expectation({1, -2}, {1, 2}, below(1))), Error,
                   "every value of an expectation's sides must be finite and positive, got -2");
}

}  // namespace
}  // namespace runner::store
