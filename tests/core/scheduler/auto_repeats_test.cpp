// repeats = "auto" in the scheduler: rounds that stop once every
// expectation is decided, run to max_repeats when none can be, stop at the
// time budget, resume where they stopped, and refuse a shard. Runs execute a
// scripted RunBody whose step time is chosen per trial and repetition, so
// every verdict is known in advance and the tests take well under a second.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "runner/common/error.hpp"
#include "runner/scheduler/auto_repeats.hpp"
#include "runner/scheduler/scheduler.hpp"
#include "runner/store/statistics.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kTestPlugins = fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / "good";

// Two trials (model.delay_us 0 and 1) with repeats = "auto" and `extra`.
std::string auto_text(const std::string& extra) {
  return "[experiment]\nname = \"auto\"\nrepeats = \"auto\"\ntimeout = \"5s\"\n" + extra +
         "[model]\nplugin = \"tiny_linear\"\n"
         "[data]\nplugin = \"tiny_data\"\nbatch_size = 8\n"
         "[optimizer]\nplugin = \"sgd\"\n"
         "[train]\nsteps = 3\nwarmup = 0\n"
         "[sweep]\n\"model.delay_us\" = [0.0, 1.0]\n";
}

std::string expect_text(const std::string& bound) {
  return "[[expect]]\nclaim = \"delay 1 vs 0\"\nmetric = \"step_time\"\nby = \"model.delay_us\"\n"
         "baseline = 0.0\nversus = 1.0\n" + bound + "\n";
}

// A run's step time, in ns, by trial index and repetition.
using StepTime = std::function<double(std::int64_t trial, std::int64_t repeat)>;

// 1 %, 2 %, 3 % and 4 % above `base` in turn: some spread, the same on both sides.
double wobble(double base, std::int64_t repeat) {
  return base * (1.0 + 0.01 * static_cast<double>(repeat % 4));
}

class Looks final : public runner::RunObserver {
 public:
  void on_plan(const runner::SweepPlan& plan) override { plans.push_back(plan); }
  void on_round_look(std::int64_t round, const std::string& finding) override {
    rounds.push_back(round);
    findings.push_back(finding);
  }
  std::vector<runner::SweepPlan> plans;
  std::vector<std::int64_t> rounds;
  std::vector<std::string> findings;
};

class AutoRepeatsTest : public ::testing::Test {
 protected:
  AutoRepeatsTest() {
    dir_ = fs::temp_directory_path() /
           ("runner-auto-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~AutoRepeatsTest() override { fs::remove_all(dir_); }

  runner::PreparedExperiment prepare(const std::string& text) {
    const fs::path file = dir_ / "auto.toml";
    std::ofstream(file) << text;
    return runner::prepare_experiment(file, {}, runner::PluginSearch{{kTestPlugins}});
  }

  runner::SchedulerOptions options(StepTime time, double sleep_s = 0) {
    runner::SchedulerOptions o;
    o.db = dir_ / "runner.db";
    o.isolation = runner::Isolation::none;
    o.body = [time, sleep_s](const runner::RunContext& c) {
      if (sleep_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
      runner::RunOutcome out;
      out.status = runner::store::RunStatus::finished;
      out.summaries.push_back(
          runner::store::summarize("step_time", "ns", {time(c.trial->index, c.repeat)}));
      return out;
    };
    return o;
  }

  fs::path dir_;
};

TEST_F(AutoRepeatsTest, AClearEffectStopsAtTheFirstRoundThatCanDecide) {
  const auto p = prepare(auto_text("") + expect_text("ratio_above = 2"));
  Looks looks;
  const auto r = runner::run_sweep(
      p, options([](std::int64_t t, std::int64_t k) { return wobble(t == 0 ? 1000 : 4000, k); }),
      looks);
  // Rounds 3 and 4 are looked at but cannot decide at 95 % (sequential_alpha
  // spends nothing there); round 5 decides.
  EXPECT_EQ(r.done, 10u);
  EXPECT_EQ(looks.rounds, (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(r.auto_stop, "after 5 round(s): 1 of 1 expectation(s) decided (1 holds, 0 refuted)");
  ASSERT_EQ(looks.plans.size(), 1u);
  EXPECT_EQ(looks.plans[0].to_run, 60u);  // planned up to max_repeats
}

TEST_F(AutoRepeatsTest, MinRepeatsDelaysTheFirstLook) {
  const auto p = prepare(auto_text("min_repeats = 7\n") + expect_text("ratio_above = 2"));
  Looks looks;
  const auto r = runner::run_sweep(
      p, options([](std::int64_t t, std::int64_t k) { return wobble(t == 0 ? 1000 : 4000, k); }),
      looks);
  EXPECT_EQ(r.done, 14u);
  EXPECT_EQ(looks.rounds, (std::vector<std::int64_t>{7}));
}

TEST_F(AutoRepeatsTest, AnAaPairOnItsBoundRunsToMaxRepeats) {
  // Both sides the same values: the interval always holds 1, so "B is faster"
  // is never decided.
  const auto p = prepare(auto_text("max_repeats = 8\n") + expect_text("ratio_below = 1"));
  Looks looks;
  const auto r =
      runner::run_sweep(p, options([](std::int64_t, std::int64_t k) { return wobble(1000, k); }),
                        looks);
  EXPECT_EQ(r.done, 16u);
  EXPECT_EQ(r.auto_stop,
            "max_repeats (8) reached, after 8 round(s): 0 of 1 expectation(s) decided (0 holds, 0 "
            "refuted)");
}

TEST_F(AutoRepeatsTest, WithoutExpectationsItStopsWhenEveryMedianIsPrecise) {
  const auto steady = prepare(auto_text(""));
  Looks looks;
  const auto r = runner::run_sweep(
      steady, options([](std::int64_t t, std::int64_t) { return t == 0 ? 1000.0 : 2000.0; }), looks);
  EXPECT_EQ(r.done, 6u);
  EXPECT_EQ(r.auto_stop,
            "after 3 round(s): 2 of 2 trial(s) with their step_time median known within +/-1% "
            "(widest +/-0.0%)");
}

TEST_F(AutoRepeatsTest, TheTimeBudgetStopsTheRounds) {
  const auto p = prepare(auto_text("time_budget = \"1s\"\n") + expect_text("ratio_below = 1"));
  Looks looks;
  const auto r = runner::run_sweep(
      p, options([](std::int64_t, std::int64_t k) { return wobble(1000, k); }, 0.2), looks);
  EXPECT_GE(r.done, 2u);
  EXPECT_LE(r.done, 8u);  // 0.4 s a round: about 3 rounds fit in the second
  EXPECT_EQ(r.done % 2, 0u);  // whole rounds only
  EXPECT_EQ(r.auto_stop, "the time budget of auto (1s) is spent after " +
                             std::to_string(r.done / 2) + " round(s)");
}

TEST_F(AutoRepeatsTest, ARerunContinuesTheRoundsWhereTheyStopped) {
  const StepTime same = [](std::int64_t, std::int64_t k) { return wobble(1000, k); };
  Looks first;
  const auto stopped =
      runner::run_sweep(prepare(auto_text("max_repeats = 4\n") + expect_text("ratio_below = 1")),
                        options(same), first);
  EXPECT_EQ(stopped.done, 8u);
  // The same trials with a higher max_repeats: the four recorded rounds are
  // kept, only rounds 5 and 6 run.
  Looks second;
  const auto resumed =
      runner::run_sweep(prepare(auto_text("max_repeats = 6\n") + expect_text("ratio_below = 1")),
                        options(same), second);
  ASSERT_EQ(second.plans.size(), 1u);
  EXPECT_EQ(second.plans[0].skipped, 8u);
  EXPECT_EQ(second.plans[0].to_run, 4u);
  EXPECT_EQ(resumed.done, 4u);
  EXPECT_EQ(second.rounds.front(), 4);
}

TEST_F(AutoRepeatsTest, AShardIsRefused) {
  const auto p = prepare(auto_text("") + expect_text("ratio_above = 2"));
  auto o = options([](std::int64_t, std::int64_t) { return 1000.0; });
  o.shard = {1, 2};
  Looks looks;
  EXPECT_THROW_MSG(
      (void)runner::run_sweep(p, o, looks), runner::Error,
      "--shard 1/2 cannot run repeats = \"auto\": the look after every round needs the runs of "
      "every trial, and a shard holds only some of them");
  EXPECT_THROW_MSG((void)runner::plan_sweep(p, o), runner::Error,
                   "--shard 1/2 cannot run repeats = \"auto\": the look after every round needs "
                   "the runs of every trial, and a shard holds only some of them");
}

TEST_F(AutoRepeatsTest, ThePlanLineNamesTheLimits) {
  const auto p = prepare(auto_text("max_repeats = 12\ntime_budget = \"20m\"\n") +
                         expect_text("ratio_above = 2"));
  EXPECT_EQ(runner::auto_repeats_line(p),
            "auto: repeats = \"auto\": rounds of one run of every trial, looked at after each "
            "from round 3, at most 12 rounds, no round started after 20m; stops when its 1 "
            "expectation(s) are decided (the first look that can decide: round 5)");
}

}  // namespace
