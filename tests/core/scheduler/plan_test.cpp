#include "runner/scheduler/plan.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

std::vector<std::pair<std::size_t, std::int64_t>> pairs(const std::vector<runner::PlannedRun>& p) {
  std::vector<std::pair<std::size_t, std::int64_t>> out;
  for (const auto& r : p) out.emplace_back(r.trial, r.repeat);
  return out;
}

TEST(Plan, RepetitionsAreInterleavedAcrossTrials) {
  const auto plan = runner::interleave(3, 2, false, 0);
  EXPECT_EQ(pairs(plan), (std::vector<std::pair<std::size_t, std::int64_t>>{
                             {0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}}));
}

TEST(Plan, TrialsWithTheirOwnRepetitionsShareTheRounds) {
  // Two files: trials 0-1 with 3 repetitions, trial 2 with 1 (it drops out
  // after the first round); equal counts give the plan of one file.
  EXPECT_EQ(pairs(runner::interleave(std::vector<std::int64_t>{3, 3, 1}, false, 0)),
            (std::vector<std::pair<std::size_t, std::int64_t>>{
                {0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}}));
  EXPECT_EQ(pairs(runner::interleave(std::vector<std::int64_t>{4, 4, 4}, true, 9)),
            pairs(runner::interleave(3, 4, true, 9)));
  EXPECT_TRUE(runner::interleave(std::vector<std::int64_t>{}, false, 0).empty());
}

TEST(Plan, ShuffledRoundsAreSeededPermutations) {
  const auto a = runner::interleave(6, 20, true, 11);
  EXPECT_EQ(pairs(a), pairs(runner::interleave(6, 20, true, 11)));
  EXPECT_NE(pairs(a), pairs(runner::interleave(6, 20, true, 12)));
  // Every round still holds each trial exactly once, and rounds stay in order.
  for (std::int64_t r = 0; r < 20; ++r) {
    std::set<std::size_t> seen;
    for (std::size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(a[static_cast<std::size_t>(r) * 6 + i].repeat, r);
      seen.insert(a[static_cast<std::size_t>(r) * 6 + i].trial);
    }
    EXPECT_EQ(seen.size(), 6u);
  }
  // Some round is not in expansion order (20 rounds of 6! orders).
  bool reordered = false;
  for (std::size_t i = 0; i < a.size(); ++i) reordered |= a[i].trial != i % 6;
  EXPECT_TRUE(reordered);
}

TEST(Plan, ShardsPartitionTheRunsDeterministically) {
  std::map<std::int64_t, int> per_shard;
  for (int t = 0; t < 50; ++t)
    for (std::int64_t r = 0; r < 4; ++r) {
      int owners = 0;
      for (std::int64_t k = 1; k <= 3; ++k)
        if (runner::in_shard("trial-" + std::to_string(t), r, {k, 3})) {
          ++owners;
          ++per_shard[k];
        }
      EXPECT_EQ(owners, 1);
    }
  for (std::int64_t k = 1; k <= 3; ++k) EXPECT_GT(per_shard[k], 40) << k;
  EXPECT_TRUE(runner::in_shard("x", 0, {1, 1}));
}

TEST(Plan, ShardSyntax) {
  const auto s = runner::parse_shard("2/4");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 4);
  EXPECT_THROW_MSG((void)runner::parse_shard("3/2"), runner::Error,
                   "--shard must be K/N with 1 <= K <= N, found '3/2'");
  EXPECT_THROW_MSG((void)runner::parse_shard("0/2"), runner::Error,
                   "--shard must be K/N with 1 <= K <= N, found '0/2'");
  EXPECT_THROW_MSG((void)runner::parse_shard("a/b"), runner::Error,
                   "--shard must be K/N with 1 <= K <= N, found 'a/b'");
  EXPECT_THROW_MSG((void)runner::parse_shard("2"), runner::Error,
                   "--shard must be K/N with 1 <= K <= N, found '2'");
}

runner::store::TrialRun run(std::int64_t id, std::int64_t repeat,
                            runner::store::RunStatus status) {
  runner::store::TrialRun r;
  r.run_id = id;
  r.repeat_index = repeat;
  r.status = status;
  r.stored_status = status;
  return r;
}

TEST(Plan, ResumeSkipsFinishedAndFailedRunsButRerunsInterruptedOnes) {
  using runner::ResumePolicy;
  using runner::store::RunStatus;
  const std::vector<runner::store::TrialRun> existing = {
      run(1, 0, RunStatus::finished), run(2, 1, RunStatus::crashed),
      run(3, 2, RunStatus::interrupted)};
  EXPECT_EQ(runner::skip_reason(existing, 0, ResumePolicy::missing), "finished as run 1");
  EXPECT_EQ(runner::skip_reason(existing, 1, ResumePolicy::missing),
            "crashed as run 2 (--rerun-failed reruns it)");
  EXPECT_EQ(runner::skip_reason(existing, 2, ResumePolicy::missing), "");
  EXPECT_EQ(runner::skip_reason(existing, 3, ResumePolicy::missing), "");
  EXPECT_EQ(runner::skip_reason(existing, 0, ResumePolicy::rerun_failed), "finished as run 1");
  EXPECT_EQ(runner::skip_reason(existing, 1, ResumePolicy::rerun_failed), "");
  EXPECT_EQ(runner::skip_reason(existing, 0, ResumePolicy::force), "");
  // A rerun that finished after an earlier failure counts as finished.
  EXPECT_EQ(runner::skip_reason({run(4, 0, RunStatus::failed), run(5, 0, RunStatus::finished)}, 0,
                                ResumePolicy::missing),
            "finished as run 5");
}

TEST(Plan, TrialIdentityCoversConfigAndPluginFiles) {
  std::vector<runner::store::PluginRecord> plugins = {{"model", "mlp", "/a.so", "1", "aaaa"},
                                                      {"loader", "synthetic", "/b.so", "1", "bbbb"}};
  const auto id = runner::trial_identity("cfg", plugins);
  std::swap(plugins[0], plugins[1]);
  EXPECT_EQ(runner::trial_identity("cfg", plugins), id);
  EXPECT_NE(runner::trial_identity("cfg2", plugins), id);
  plugins[0].sha256 = "cccc";
  EXPECT_NE(runner::trial_identity("cfg", plugins), id);
  // The environment's hash joins it; none given keeps the identity it had.
  const auto changed = runner::trial_identity("cfg", plugins);
  EXPECT_EQ(runner::trial_identity("cfg", plugins, ""), changed);
  EXPECT_NE(runner::trial_identity("cfg", plugins, "env1"), changed);
  EXPECT_NE(runner::trial_identity("cfg", plugins, "env1"),
            runner::trial_identity("cfg", plugins, "env2"));
}

}  // namespace
