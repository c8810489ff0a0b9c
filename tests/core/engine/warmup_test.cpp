#include "runner/engine/warmup.hpp"

#include <gtest/gtest.h>

#include <random>

namespace {

TEST(WarmupDetector, EndsWhenTwoWindowsAgree) {
  // A decaying start (caches, allocator, lazy init) that settles at 100.
  runner::WarmupDetector d(5, 0.05, 5, 1000);
  std::int64_t ended_at = -1;
  for (int i = 0; i < 200 && ended_at < 0; ++i) {
    const double t = 100.0 + 400.0 * std::exp(-0.3 * i);
    if (d.add(t)) ended_at = d.steps();
  }
  ASSERT_GT(ended_at, 0);
  EXPECT_TRUE(d.converged());
  // 400 e^{-0.3 i} is below 5 % of 100 only after i ~ 14; the windows agree a
  // little earlier because medians of two neighbouring windows are compared.
  EXPECT_GE(ended_at, 10);
  EXPECT_LE(ended_at, 25);
}

TEST(WarmupDetector, NeverBeforeTwoFullWindows) {
  runner::WarmupDetector d(10, 0.05, 1, 1000);
  for (int i = 0; i < 19; ++i) EXPECT_FALSE(d.add(100.0)) << i;
  EXPECT_TRUE(d.add(100.0));
  EXPECT_EQ(d.steps(), 20);
}

TEST(WarmupDetector, GivesUpAtTheCapAndSaysSo) {
  runner::WarmupDetector d(5, 0.05, 5, 40);
  std::int64_t ended_at = -1;
  for (int i = 0; i < 100 && ended_at < 0; ++i)
    if (d.add(100.0 * (1 + i))) ended_at = d.steps();  // keeps drifting upwards
  EXPECT_EQ(ended_at, 40);
  EXPECT_FALSE(d.converged());
}

TEST(WarmupDetector, NoisyButStationarySeriesSettles) {
  std::mt19937_64 gen(3);
  std::normal_distribution<double> noise(100.0, 2.0);
  auto d = runner::WarmupDetector::for_steps(200);
  std::int64_t ended_at = -1;
  for (int i = 0; i < 200 && ended_at < 0; ++i)
    if (d.add(noise(gen))) ended_at = d.steps();
  EXPECT_EQ(ended_at, 20);
  EXPECT_TRUE(d.converged());
}

}  // namespace
