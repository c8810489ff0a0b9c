// What the ranks of a run tell each other outside the collectives: the
// torchrun environment contract, the straggler figures, and RankLink's
// account of a failure (a recorded error, a heartbeat that stopped, a rank
// that never joined), over a real FileStore shared by threads of this process.
#include "runner/engine/ranks.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

using Env = std::map<std::string, std::string>;

std::optional<runner::JobEnvironment> from(const Env& env) {
  return runner::job_environment([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

const Env kTorchrun{{"RANK", "3"},          {"WORLD_SIZE", "4"},        {"LOCAL_RANK", "1"},
                    {"MASTER_ADDR", "node-a"}, {"MASTER_PORT", "29500"}};

TEST(JobEnvironment, NoneOfTheVariablesMeansNoJob) {
  EXPECT_FALSE(from({}).has_value());
  EXPECT_FALSE(from({{"OMP_NUM_THREADS", "1"}}).has_value());
}

TEST(JobEnvironment, TheFiveVariablesAreRead) {
  const auto job = from(kTorchrun);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->rank, 3);
  EXPECT_EQ(job->world_size, 4);
  EXPECT_EQ(job->local_rank, 1);
  EXPECT_EQ(job->master_addr, "node-a");
  EXPECT_EQ(job->master_port, 29500);
  EXPECT_FALSE(job->agent_store);
  Env agent = kTorchrun;
  agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  agent["TORCHELASTIC_RESTART_COUNT"] = "2";
  EXPECT_TRUE(from(agent)->agent_store);
  EXPECT_EQ(from(agent)->restart_count, 2);
}

TEST(JobEnvironment, TorchrunsNodeLayoutIsReadWhenSet) {
  EXPECT_EQ(from(kTorchrun)->node_rank, -1);  // other launchers set none
  EXPECT_EQ(from(kTorchrun)->local_world_size, -1);
  Env torchrun = kTorchrun;
  torchrun["GROUP_RANK"] = "1";
  torchrun["LOCAL_WORLD_SIZE"] = "2";
  EXPECT_EQ(from(torchrun)->node_rank, 1);
  EXPECT_EQ(from(torchrun)->local_world_size, 2);
  torchrun["GROUP_RANK"] = "4";
  EXPECT_THROW_MSG(from(torchrun), runner::Error,
                   "GROUP_RANK is '4', not a whole number between 0 and 3");
}

TEST(JobEnvironment, SomeButNotAllIsAnError) {
  EXPECT_THROW_MSG(from({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), runner::Error,
                   "RANK, WORLD_SIZE are set but LOCAL_RANK, MASTER_ADDR, MASTER_PORT are not: "
                   "runner joins a launched job only when all of RANK, WORLD_SIZE, LOCAL_RANK, "
                   "MASTER_ADDR and MASTER_PORT are set");
}

TEST(JobEnvironment, ValuesOutOfRangeAreErrors) {
  Env bad = kTorchrun;
  bad["RANK"] = "4";
  EXPECT_THROW_MSG(from(bad), runner::Error, "RANK is '4', not a whole number between 0 and 3");
  bad = kTorchrun;
  bad["MASTER_PORT"] = "http";
  EXPECT_THROW_MSG(from(bad), runner::Error,
                   "MASTER_PORT is 'http', not a whole number between 1 and 65535");
}

TEST(StragglerSteps, MaxAndMedianPerMeasuredStep) {
  // Three ranks, four steps, the first a warm-up; rank 2 is slow at step 2.
  const std::vector<std::vector<double>> times{{10, 20, 20, 30}, {11, 21, 22, 31}, {50, 19, 90, 29}};
  const auto s = runner::straggler_steps(times, {false, true, true, true});
  EXPECT_EQ(s.max_ns, (std::vector<double>{21, 90, 31}));
  EXPECT_EQ(s.median_ns, (std::vector<double>{20, 22, 30}));
  EXPECT_EQ(s.slowest_rank, (std::vector<std::int64_t>{1, 2, 1}));
}

TEST(StragglerSteps, StepsARankLacksAreLeftOut) {
  const auto s = runner::straggler_steps({{1, 2, 3}, {4, 5}}, {true, true, true});
  EXPECT_EQ(s.max_ns, (std::vector<double>{4, 5}));
  EXPECT_EQ(s.median_ns, (std::vector<double>{2.5, 3.5}));
}

class RankLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = fs::temp_directory_path() /
             ("runner-ranks-test-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove(store_);
  }
  void TearDown() override { fs::remove(store_); }
  runner::Rendezvous at(int rank, int world) const {
    runner::Rendezvous r;
    r.store_path = store_.string();
    r.rank = rank;
    r.world_size = world;
    r.timeout = std::chrono::milliseconds(5000);
    return r;
  }
  fs::path store_;
};

TEST_F(RankLinkTest, ARecordedFailureIsReportedWithTheRanksHost) {
  runner::RankLink zero(at(0, 2)), one(at(1, 2));
  EXPECT_EQ(zero.missing_ranks(), std::vector<int>{});
  one.fail("model plugin 'x' failed in forward: boom");
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(zero.explain_failure(), "rank 1 (host " + std::string(host) + ", pid " +
                                        std::to_string(::getpid()) +
                                        ") failed: model plugin 'x' failed in forward: boom");
}

TEST_F(RankLinkTest, ARankWhoseHeartbeatStopsIsLost) {
  runner::RankLink zero(at(0, 3), std::chrono::milliseconds(50));
  runner::RankLink one(at(1, 3), std::chrono::milliseconds(50));
  auto two = std::make_unique<runner::RankLink>(at(2, 3), std::chrono::milliseconds(50));
  two.reset();  // its heartbeat stops, as when its process is killed
  const std::string why = zero.explain_failure();
  EXPECT_EQ(why.rfind("lost rank 2 (host ", 0), 0u) << why;
  EXPECT_NE(why.find("no heartbeat for 0.3 s (killed, or its machine is unreachable)"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("rank 1"), std::string::npos) << why;  // alive: not blamed
}

TEST_F(RankLinkTest, ARankThatNeverJoinedIsNamed) {
  runner::RankLink zero(at(0, 3), std::chrono::milliseconds(50));
  runner::RankLink one(at(1, 3), std::chrono::milliseconds(50));
  EXPECT_EQ(zero.missing_ranks(), std::vector<int>{2});
  EXPECT_EQ(zero.explain_failure(), "lost rank 2: it never joined");
}

TEST_F(RankLinkTest, StepTimesAndTheStepCountGoThroughTheStore) {
  runner::RankLink zero(at(0, 2)), one(at(1, 2));
  EXPECT_FALSE(one.finished_steps(std::chrono::milliseconds(0)).has_value());
  zero.finish(3);
  EXPECT_EQ(one.finished_steps(std::chrono::milliseconds(1000)), 3);
  one.post_step_times({1.5, 2.5, 3.5});
  const auto times = zero.collect_step_times();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_TRUE(times[0].empty());
  EXPECT_EQ(times[1], (std::vector<double>{1.5, 2.5, 3.5}));
}

}  // namespace
