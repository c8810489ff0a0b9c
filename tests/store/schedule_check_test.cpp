// The schedule check against the schedules `runner run` itself makes
// (runner::interleave): the shipped sweeps (powersgd.toml: 6 trials,
// fused_ops_step.toml: 4, at the repetitions they ship with and shuffled)
// never read as separate blocks, for any two trials and any two pooled groups
// of trials; two files run one after the other always do (issue 36 item 3).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runner/scheduler/plan.hpp"
#include "runner/store/schedule_check.hpp"

namespace {

using runner::store::check_schedule;
using runner::store::TimedValue;

// The start time of every run of the plan, one second apart, by trial.
std::vector<std::vector<double>> starts_by_trial(std::size_t trials, std::int64_t repeats,
                                                 bool shuffle) {
  std::vector<std::vector<double>> starts(trials);
  double t = 0;
  for (const auto& run : runner::interleave(trials, repeats, shuffle, 7))
    starts[run.trial].push_back(t++);
  return starts;
}

// The runs of the trials whose bit is set in `mask`, as one side.
std::vector<TimedValue> side_of(const std::vector<std::vector<double>>& starts, unsigned mask) {
  std::vector<TimedValue> side;
  for (std::size_t t = 0; t < starts.size(); ++t)
    if (mask & (1u << t))
      for (double s : starts[t]) side.push_back({s, 100});
  return side;
}

// Every split of the trials into two non-empty disjoint groups: pairs of
// single trials and every pooling (what --by without --where, or
// trial:1,2 trial:3,4, puts on a side).
void expect_never_blocks(std::size_t trials, std::int64_t repeats, bool shuffle) {
  const auto starts = starts_by_trial(trials, repeats, shuffle);
  const unsigned all = (1u << trials) - 1;
  int splits = 0;
  for (unsigned a = 1; a < all; ++a)
    for (unsigned b = 1; b <= all; ++b) {
      if ((a & b) != 0) continue;
      const auto check = check_schedule(side_of(starts, a), side_of(starts, b));
      EXPECT_FALSE(check.separate_blocks)
          << trials << " trials x " << repeats << (shuffle ? " shuffled" : "") << ": sides " << a
          << " and " << b << " read as blocks (interleaving " << check.interleaving << ")";
      EXPECT_GE(check.interleaving, (repeats - 1.0) / repeats - 1e-12) << a << " " << b;
      ++splits;
    }
  EXPECT_GT(splits, 0);
}

TEST(ScheduleCheckOnShippedSweeps, PowerSgdsSixTrialsNeverReadAsBlocks) {
  // The old measure (alternations of the two sides) put the --by
  // comm_hook.plugin sides of this sweep at 0.36 and warned.
  for (const std::int64_t repeats : {3, 5})
    for (const bool shuffle : {false, true}) expect_never_blocks(6, repeats, shuffle);
}

TEST(ScheduleCheckOnShippedSweeps, FusedOpsStepsFourTrialsNeverReadAsBlocks) {
  // ... and the --by model.norm_op sides of this one at 0.44.
  for (const std::int64_t repeats : {2, 5})
    for (const bool shuffle : {false, true}) expect_never_blocks(4, repeats, shuffle);
}

TEST(ScheduleCheckOnShippedSweeps, FilesRunOneAfterTheOtherAreBlocks) {
  // `runner run a.toml` then `runner run b.toml`: two plans, one after the other.
  const auto first = starts_by_trial(2, 5, false);
  auto second = starts_by_trial(2, 5, false);
  for (auto& trial : second)
    for (double& s : trial) s += 100;
  std::vector<TimedValue> a, b;
  for (double s : first[0]) a.push_back({s, 100});
  for (double s : second[0]) b.push_back({s, 100});
  auto check = check_schedule(a, b);
  EXPECT_TRUE(check.separate_blocks);
  EXPECT_EQ(check.interleaving, 0);
  // Both trials of each file pooled on a side: still blocks.
  for (double s : first[1]) a.push_back({s, 100});
  for (double s : second[1]) b.push_back({s, 100});
  check = check_schedule(a, b);
  EXPECT_TRUE(check.separate_blocks);
  // B before A reads the same.
  EXPECT_TRUE(check_schedule(b, a).separate_blocks);
  // Mostly blocks: one run of B among A's, the other four after them.
  std::vector<TimedValue> mostly_b = {{2.5, 100}, {20, 100}, {21, 100}, {22, 100}, {23, 100}};
  std::vector<TimedValue> a5 = {{0, 100}, {1, 100}, {2, 100}, {3, 100}, {4, 100}};
  check = check_schedule(a5, mostly_b);
  EXPECT_NEAR(check.interleaving, 1 - std::abs(2 * 23.0 / 25 - 1), 1e-12);
  EXPECT_TRUE(check.separate_blocks);
}

}  // namespace
