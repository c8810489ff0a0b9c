// Change points of a series of repeated measurements (find_change_points):
// synthetic series whose truth is known.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using runner::store::ChangePoint;
using runner::store::find_change_points;
using Series = std::vector<std::vector<double>>;

// Normal noise drawn only from std::mt19937_64's output (fixed by the
// standard), so the series are the same with every standard library.
class Noise {
 public:
  explicit Noise(std::uint64_t seed) : rng_(seed) {}
  double uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    return std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
  }

 private:
  std::mt19937_64 rng_;
};

// `sizes[i]` values around level(i) with a coefficient of variation `cv`.
template <class Level>
Series series(Noise& noise, const std::vector<std::size_t>& sizes, double cv, Level level) {
  Series out(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i)
    for (std::size_t r = 0; r < sizes[i]; ++r) out[i].push_back(level(i) * (1 + cv * noise.normal()));
  return out;
}

std::vector<std::size_t> equal(std::size_t points, std::size_t repetitions) {
  return std::vector<std::size_t>(points, repetitions);
}

std::vector<std::size_t> indices(const std::vector<ChangePoint>& found) {
  std::vector<std::size_t> out;
  for (const auto& c : found) out.push_back(c.index);
  return out;
}

// A/A: 200 series of 30 points x 5 repetitions, 2 % noise, no change. The
// stated rate is at most 1 change point per 100 points.
TEST(ChangePoints, NoChangeFindsNoneAtTheStatedRate) {
  Noise noise(1);
  std::size_t found = 0, points = 0;
  for (int s = 0; s < 200; ++s) {
    const Series x = series(noise, equal(30, 5), 0.02, [](std::size_t) { return 100.0; });
    found += find_change_points(x).size();
    points += x.size();
  }
  EXPECT_LE(found * 100, points) << found << " change points in " << points << " points";
}

TEST(ChangePoints, AClearStepIsFoundWhereTheNewLevelStarts) {
  Noise noise(2);
  const Series x = series(noise, equal(30, 5), 0.02, [](std::size_t i) { return i < 20 ? 100.0 : 110.0; });
  const auto found = find_change_points(x);
  ASSERT_EQ(found.size(), 1U);
  const ChangePoint& c = found.front();
  EXPECT_EQ(c.index, 20U);
  EXPECT_EQ(c.runs_before, 100U);
  EXPECT_EQ(c.runs_after, 50U);
  EXPECT_NEAR(c.before, 100, 1);
  EXPECT_NEAR(c.after, 110, 1.5);
  EXPECT_NEAR(c.ratio.ratio, 1.10, 0.015);
  EXPECT_LT(c.ratio.lower, 1.10);
  EXPECT_GT(c.ratio.upper, 1.10);
  EXPECT_GT(c.ratio.lower, 1);
  EXPECT_LT(c.p_value, 0.05);
}

TEST(ChangePoints, TwoStepsAreBothFound) {
  Noise noise(3);
  const Series x = series(noise, equal(30, 5), 0.02, [](std::size_t i) {
    return i < 10 ? 100.0 : i < 20 ? 108.0 : 97.0;
  });
  const auto found = find_change_points(x);
  EXPECT_EQ(indices(found), (std::vector<std::size_t>{10, 20}));
  ASSERT_EQ(found.size(), 2U);
  EXPECT_GT(found[0].ratio.lower, 1);  // a slowdown, then a speed-up
  EXPECT_LT(found[1].ratio.upper, 1);
  EXPECT_EQ(found[1].runs_before, 50U);  // the segment between the two changes
}

// One disturbed run (3x slower) anywhere, even in the last point, is not a level.
TEST(ChangePoints, AnOutlyingRunIsNotAChange) {
  for (std::size_t at : {0U, 7U, 15U, 29U}) {
    Noise noise(4 + at);
    Series x = series(noise, equal(30, 5), 0.02, [](std::size_t) { return 100.0; });
    x[at][2] *= 3;
    EXPECT_TRUE(find_change_points(x).empty()) << "outlier in point " << at;
  }
}

TEST(ChangePoints, UnequalRepetitionsPerPoint) {
  Noise noise(5);
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 30; ++i) sizes.push_back(1 + i % 7);  // 1 to 7, some points of one run
  const Series x = series(noise, sizes, 0.02, [](std::size_t i) { return i < 15 ? 100.0 : 106.0; });
  const auto found = find_change_points(x);
  EXPECT_EQ(indices(found), std::vector<std::size_t>{15});
}

TEST(ChangePoints, AnEmptyPointDoesNotTakeTheChange) {
  Noise noise(6);
  Series x = series(noise, equal(20, 5), 0.02, [](std::size_t i) { return i < 12 ? 100.0 : 110.0; });
  x[11].clear();  // the change comes after an empty point: it starts at 12
  EXPECT_EQ(indices(find_change_points(x)), std::vector<std::size_t>{12});
}

// What a CI job needs: the commit that slowed down is the last point.
TEST(ChangePoints, AStepAtTheLastPointIsFoundThere) {
  Noise noise(7);
  const Series x = series(noise, equal(12, 5), 0.02, [](std::size_t i) { return i < 11 ? 100.0 : 110.0; });
  const auto found = find_change_points(x);
  ASSERT_EQ(found.size(), 1U);
  EXPECT_EQ(found.front().index, 11U);
  EXPECT_GT(found.front().ratio.lower, 1);
}

TEST(ChangePoints, SameSeriesSameAnswerAndSeedIsUsed) {
  Noise noise(8);
  const Series x = series(noise, equal(30, 3), 0.02, [](std::size_t i) { return i < 15 ? 100.0 : 104.0; });
  const auto a = find_change_points(x), b = find_change_points(x);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].p_value, b[i].p_value);
    EXPECT_EQ(a[i].ratio.lower, b[i].ratio.lower);
  }
}

TEST(ChangePoints, ConstantAndShortSeriesHaveNone) {
  EXPECT_TRUE(find_change_points(Series(10, std::vector<double>(4, 5.0))).empty());
  EXPECT_TRUE(find_change_points({}).empty());
  EXPECT_TRUE(find_change_points({{1.0, 1.1}, {2.0, 2.1}}).empty());  // 2 values a side: below 3
}

TEST(ChangePoints, BadInputIsRefused) {
  EXPECT_THROW_MSG((void)find_change_points({{1.0, 2.0}, {0.0}}), runner::Error,
                   "change points: point 1 has a value that is not finite and positive (0)");
  runner::store::ChangePointOptions options;
  options.permutations = 5;
  EXPECT_THROW_MSG((void)find_change_points({{1.0}}, options), runner::Error,
                   "change points: permutations must be at least 19, got 5");
}

}  // namespace
