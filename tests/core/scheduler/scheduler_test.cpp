// The scheduler against a real store in a temporary file: resume, the stop
// policy, orphaned runs, how run processes that end badly are recorded, and
// what the observer sees. Runs execute a scripted RunBody instead of the
// engine, so these tests measure nothing and take milliseconds.
#include "runner/scheduler/scheduler.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "runner/common/error.hpp"
#include "runner/process/oom.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kTestPlugins = fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / "good";

// Two trials (delay_us 0 and 1) x `repeats`, on the good test plugin.
std::string experiment_text(int repeats, const std::string& extra = "") {
  return "[experiment]\nname = \"sched\"\nrepeats = " + std::to_string(repeats) +
         "\ntimeout = \"5s\"\n" + extra +
         "[model]\nplugin = \"tiny_linear\"\n"
         "[data]\nplugin = \"tiny_data\"\nbatch_size = 8\n"
         "[optimizer]\nplugin = \"sgd\"\n"
         "[train]\nsteps = 3\nwarmup = 0\n"
         "[sweep]\n\"model.delay_us\" = [0.0, 1.0]\n";
}

// What the body does for a run, by (trial index, repeat); finished otherwise.
using Script = std::map<std::pair<std::size_t, std::int64_t>, runner::store::RunStatus>;

runner::RunOutcome outcome_of(runner::store::RunStatus status) {
  runner::RunOutcome out;
  out.status = status;
  if (status != runner::store::RunStatus::finished)
    out.error = std::string("scripted ") + to_string(status);
  runner::store::Sample sample;
  sample.step = 0;
  sample.wall_ns = 1000;
  out.samples.push_back(sample);
  return out;
}

// Records every event in order.
class Recorder final : public runner::RunObserver {
 public:
  void on_plan(const runner::SweepPlan& plan) override {
    plans.push_back(plan);
    events.push_back("plan");
  }
  void on_run_started(const runner::RunStarted& run) override {
    started.push_back(run);
    events.push_back("start " + std::to_string(run.trial->index) + "/" + std::to_string(run.repeat));
  }
  void on_run_ended(const runner::RunEnded& run) override {
    ended.push_back(run);
    events.push_back(std::string("end ") + to_string(run.detail.row.status));
  }
  std::vector<runner::SweepPlan> plans;
  std::vector<runner::RunStarted> started;
  std::vector<runner::RunEnded> ended;
  std::vector<std::string> events;
};

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() {
    dir_ = fs::temp_directory_path() / ("runner-scheduler-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~SchedulerTest() override { fs::remove_all(dir_); }

  runner::PreparedExperiment prepare(int repeats, const std::string& extra = "") {
    const fs::path file = dir_ / "sched.toml";
    std::ofstream(file) << experiment_text(repeats, extra);
    return runner::prepare_experiment(file, {}, runner::PluginSearch{{kTestPlugins}});
  }

  // Options whose body follows `script` in-process and counts its calls.
  runner::SchedulerOptions options(const Script& script,
                                   runner::Isolation isolation = runner::Isolation::none) {
    runner::SchedulerOptions o;
    o.db = dir_ / "runner.db";
    o.isolation = isolation;
    o.body = [this, script](const runner::RunContext& c) {
      ++calls_;
      const auto it = script.find({static_cast<std::size_t>(c.trial->index), c.repeat});
      return outcome_of(it == script.end() ? runner::store::RunStatus::finished : it->second);
    };
    return o;
  }

  std::vector<std::string> statuses() const {
    std::vector<std::string> out;
    const runner::store::Store db = runner::store::Store::open_read_only(dir_ / "runner.db");
    for (const auto& row : db.list_runs(1000)) out.insert(out.begin(), to_string(row.status));
    return out;
  }

  fs::path dir_;
  int calls_ = 0;
};

TEST_F(SchedulerTest, RepetitionsAreInterleavedAcrossTrialsAndObservedInOrder) {
  const auto p = prepare(2);
  Recorder seen;
  const runner::SweepResult r = runner::run_sweep(p, options({}), seen);
  EXPECT_EQ(seen.events,
            (std::vector<std::string>{"plan", "start 0/0", "end finished", "start 1/0",
                                      "end finished", "start 0/1", "end finished", "start 1/1",
                                      "end finished"}));
  ASSERT_EQ(seen.plans.size(), 1u);
  EXPECT_EQ(seen.plans[0].trials, 2u);
  EXPECT_EQ(seen.plans[0].repeats, 2);
  EXPECT_EQ(seen.plans[0].to_run, 4u);
  EXPECT_EQ(seen.plans[0].skipped, 0u);
  ASSERT_EQ(seen.started.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(seen.started[i].position, i + 1);
    EXPECT_EQ(seen.started[i].total, 4u);
    EXPECT_EQ(seen.started[i].eta_s.has_value(), i > 0);  // known once a run has ended
  }
  EXPECT_EQ(r.done, 4u);
  EXPECT_EQ(r.failures, 0);
  EXPECT_EQ(r.stop, runner::StopReason::none);
  EXPECT_EQ(calls_, 4);
}

TEST_F(SchedulerTest, ResumeRunsOnlyWhatIsMissingUnlessAskedForMore) {
  const auto p = prepare(2);
  Recorder first;
  // Trial 0 repeat 1 fails, trial 1 repeat 0 is interrupted.
  (void)runner::run_sweep(
      p, options({{{0, 1}, runner::store::RunStatus::failed}, {{1, 0}, runner::store::RunStatus::interrupted}}),
      first);
  EXPECT_EQ(statuses(), (std::vector<std::string>{"finished", "interrupted", "failed", "finished"}));

  // Default policy: the interrupted run only.
  Recorder second;
  const runner::SweepResult again = runner::run_sweep(p, options({}), second);
  EXPECT_EQ(second.plans.at(0).to_run, 1u);
  EXPECT_EQ(second.plans.at(0).skipped, 3u);
  ASSERT_EQ(second.started.size(), 1u);
  EXPECT_EQ(second.started[0].trial->index, 1);
  EXPECT_EQ(second.started[0].repeat, 0);
  EXPECT_EQ(again.done, 1u);

  // The dry-run plan agrees and says why the others are skipped.
  runner::SchedulerOptions rerun = options({});
  rerun.policy = runner::ResumePolicy::rerun_failed;
  const auto actions = runner::plan_sweep(p, rerun);
  ASSERT_EQ(actions.size(), 4u);
  EXPECT_EQ(actions[0].skip_reason, "finished as run 1");
  EXPECT_EQ(actions[1].skip_reason, "finished as run 5");
  EXPECT_EQ(actions[2].skip_reason, "");  // the failed one, with --rerun-failed
  EXPECT_EQ(actions[3].skip_reason, "finished as run 4");

  Recorder third;
  (void)runner::run_sweep(p, rerun, third);
  ASSERT_EQ(third.started.size(), 1u);
  EXPECT_EQ(third.started[0].trial->index, 0);
  EXPECT_EQ(third.started[0].repeat, 1);

  runner::SchedulerOptions force = options({});
  force.policy = runner::ResumePolicy::force;
  Recorder fourth;
  EXPECT_EQ(runner::run_sweep(p, force, fourth).done, 4u);
}

TEST_F(SchedulerTest, ConsecutiveFailuresStopTheSweep) {
  const auto p = prepare(3);
  Script all_fail;
  for (std::size_t t = 0; t < 2; ++t)
    for (std::int64_t r = 0; r < 3; ++r) all_fail[{t, r}] = runner::store::RunStatus::failed;
  runner::SchedulerOptions o = options(all_fail);
  o.max_consecutive_failures = 2;
  Recorder seen;
  const runner::SweepResult r = runner::run_sweep(p, o, seen);
  EXPECT_EQ(r.stop, runner::StopReason::consecutive_failures);
  EXPECT_EQ(r.done, 2u);
  EXPECT_EQ(r.failures, 2);
  EXPECT_EQ(r.consecutive_failures, 2);
  EXPECT_EQ(r.planned, 6u);
  EXPECT_EQ(seen.started.at(1).failures, 1);  // reported to the observer as it goes
}

TEST_F(SchedulerTest, AFinishedRunResetsTheConsecutiveCountButNotTheTotal) {
  const auto p = prepare(3);
  // Order: 0/0 1/0 0/1 1/1 0/2 1/2; failures at 0/0, 0/1, 1/2 -> never 2 in a row.
  runner::SchedulerOptions o = options({{{0, 0}, runner::store::RunStatus::failed},
                                        {{0, 1}, runner::store::RunStatus::diverged},
                                        {{1, 2}, runner::store::RunStatus::failed}});
  o.max_consecutive_failures = 2;
  Recorder seen;
  runner::SweepResult r = runner::run_sweep(p, o, seen);
  EXPECT_EQ(r.stop, runner::StopReason::none);
  EXPECT_EQ(r.done, 6u);
  EXPECT_EQ(r.failures, 3);

  // The same failures against a total limit of 2: it stops at the second (0/1).
  o.policy = runner::ResumePolicy::force;
  o.max_failures = 2;
  Recorder limited;
  r = runner::run_sweep(p, o, limited);
  EXPECT_EQ(r.stop, runner::StopReason::max_failures);
  EXPECT_EQ(r.done, 3u);
}

TEST_F(SchedulerTest, AnInterruptedRunIsNotAFailure) {
  const auto p = prepare(2);
  runner::SchedulerOptions o = options({{{0, 0}, runner::store::RunStatus::interrupted},
                                        {{1, 0}, runner::store::RunStatus::interrupted}});
  o.max_consecutive_failures = 1;
  Recorder seen;
  const runner::SweepResult r = runner::run_sweep(p, o, seen);
  EXPECT_EQ(r.failures, 0);
  EXPECT_EQ(r.done, 4u);
}

// A pid that no process has any more: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(SchedulerTest, RunsOfAGoneRunnerAreMarkedInterruptedAndRerun) {
  const auto p = prepare(1);
  Recorder first;
  (void)runner::run_sweep(p, options({}), first);
  // A runner killed with SIGKILL left a run "running" (claimed, no verdict).
  std::int64_t orphan = 0, alive = 0;
  {
    runner::store::Store db = runner::store::Store::open(dir_ / "runner.db");
    runner::store::RunStart start;
    start.trial_id = first.ended.at(0).detail.row.trial_id;
    start.repeat_index = 5;  // not a planned repetition: the plan does not rerun it
    start.kind = runner::RunKind::train;
    start.pid = dead_pid();
    orphan = db.begin_run(start);
    start.pid = ::getpid();  // this process is alive: its run is left alone
    alive = db.begin_run(start);
  }
  Recorder second;
  (void)runner::run_sweep(p, options({}), second);
  EXPECT_EQ(second.plans.at(0).marked_interrupted, 1);
  const runner::store::Store db = runner::store::Store::open_read_only(dir_ / "runner.db");
  const auto gone = db.get_run(orphan);
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->row.status, runner::store::RunStatus::interrupted);
  EXPECT_EQ(gone->error, "its runner process (pid " + std::to_string(*gone->pid) + ") is gone");
  EXPECT_EQ(db.get_run(alive)->row.status, runner::store::RunStatus::running);
}

TEST_F(SchedulerTest, RunProcessesThatEndBadlyAreRecordedByTheScheduler) {
  const auto p = prepare(1, "");
  runner::SchedulerOptions o = options({}, runner::Isolation::process);
  o.max_consecutive_failures = 0;
  o.body = [](const runner::RunContext& c) -> runner::RunOutcome {
    if (c.trial->index == 0) std::raise(SIGSEGV);
    ::_exit(0);  // ends without recording anything
  };
  Recorder seen;
  const runner::SweepResult r = runner::run_sweep(p, o, seen);
  EXPECT_EQ(r.failures, 2);
  ASSERT_EQ(seen.ended.size(), 2u);
  EXPECT_EQ(seen.ended[0].detail.row.status, runner::store::RunStatus::crashed);
  EXPECT_EQ(seen.ended[0].detail.error, "killed by signal 11 (Segmentation fault)");
  EXPECT_EQ(seen.ended[0].detail.signal, SIGSEGV);
  EXPECT_EQ(seen.ended[1].detail.row.status, runner::store::RunStatus::failed);
  EXPECT_EQ(seen.ended[1].detail.error,
            "the run process exited with code 0 before recording a result");
}

// kill -9 of a data-parallel run's rank 0 (its run process) by someone else:
// recorded naming that rank and its host, and out of memory only if the
// kernel's count of OOM kills says so (it did not kill anything here).
TEST_F(SchedulerTest, AKilledRankZeroIsNamedAndNotCalledOutOfMemory) {
  const fs::path file = dir_ / "killed.toml";
  std::ofstream(file) << "[experiment]\nname = \"killed\"\nrepeats = 1\ntimeout = \"60s\"\n"
                         "[model]\nplugin = \"tiny_linear\"\nkill_at_step = 2\nfail_rank = 0\n"
                         "[data]\nplugin = \"tiny_data\"\nbatch_size = 8\n"
                         "[optimizer]\nplugin = \"sgd\"\n[train]\nsteps = 3\nwarmup = 0\n"
                         "[distributed]\nworld_size = 2\n";
  const auto p = runner::prepare_experiment(file, {}, runner::PluginSearch{{kTestPlugins}});
  runner::SchedulerOptions o;  // the real engine
  o.db = dir_ / "runner.db";
  o.isolation = runner::Isolation::process;
  Recorder seen;
  (void)runner::run_sweep(p, o, seen);
  ASSERT_EQ(seen.ended.size(), 1u);
  const runner::store::RunDetail& run = seen.ended[0].detail;
  EXPECT_EQ(run.row.status, runner::store::RunStatus::crashed);
  EXPECT_EQ(run.signal, SIGKILL);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string rank = "rank 0 of 2 (host " + std::string(host) + ", pid ";
  EXPECT_EQ(run.error.substr(0, rank.size()), rank) << run.error;
  const fs::path counter = runner::oom_kill_counter_file();
  const auto kills = runner::read_oom_kills(counter);
  const std::string why =
      kills ? ") was killed by signal 9 (Killed) from outside runner (not the kernel's OOM "
              "killer: oom_kill stayed at " + std::to_string(*kills) + " in " + counter.string() +
              ")"
            : ") was killed by signal 9 (Killed) from outside runner, or by the kernel's OOM "
              "killer (this machine has no cgroup count of OOM kills to tell which)";
  ASSERT_GT(run.error.size(), why.size()) << run.error;
  EXPECT_EQ(run.error.substr(run.error.size() - why.size()), why) << run.error;
  EXPECT_EQ(run.error.find("out of memory"), std::string::npos) << run.error;
}

TEST_F(SchedulerTest, AHungRunProcessIsKilledAtTheTimeoutWhileItsHeartbeatIsKept) {
  runner::PreparedExperiment p = prepare(1, "");
  for (auto& t : p.trials) t.experiment.timeout_s = 1.0;
  runner::SchedulerOptions o = options({}, runner::Isolation::process);
  o.heartbeat = std::chrono::duration<double>(0.05);
  const fs::path db = o.db;
  o.body = [db](const runner::RunContext& c) -> runner::RunOutcome {
    if (c.trial->index == 1) for (;;) ::pause();
    // Finishes once the scheduler has written a heartbeat; times out otherwise.
    for (;;) {
      const auto run = runner::store::Store::open_read_only(db).get_run(c.run_id);
      if (run && run->heartbeat_at != run->row.started_at)
        return outcome_of(runner::store::RunStatus::finished);
      ::usleep(10000);
    }
  };
  Recorder seen;
  (void)runner::run_sweep(p, o, seen);
  ASSERT_EQ(seen.ended.size(), 2u);
  EXPECT_EQ(seen.ended[0].detail.row.status, runner::store::RunStatus::finished);
  EXPECT_EQ(seen.ended[1].detail.row.status, runner::store::RunStatus::timeout);
  EXPECT_EQ(seen.ended[1].detail.error, "exceeded the timeout of 1s and was killed");
}

TEST_F(SchedulerTest, ARunProcessThatFailsOutsideTheEngineRecordsItsOwnReason) {
  const auto p = prepare(1, "");
  runner::SchedulerOptions o = options({}, runner::Isolation::process);
  o.body = [](const runner::RunContext& c) -> runner::RunOutcome {
    if (c.trial->index == 0)
      throw std::runtime_error("set_num_threads: refused 1000000 threads\nException raised from ...");
    // The disk fills up: every write to a regular file now fails (EFBIG), as
    // with ENOSPC, so the run process cannot record anything itself.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit none{0, 0};
    ::setrlimit(RLIMIT_FSIZE, &none);
    throw std::runtime_error("cannot record the samples of run 2: database or disk is full");
  };
  Recorder seen;
  (void)runner::run_sweep(p, o, seen);
  ASSERT_EQ(seen.ended.size(), 2u);
  EXPECT_EQ(seen.ended[0].detail.row.status, runner::store::RunStatus::failed);
  EXPECT_EQ(seen.ended[0].detail.error, "set_num_threads: refused 1000000 threads");
  EXPECT_EQ(seen.ended[1].detail.row.status, runner::store::RunStatus::failed);
  EXPECT_EQ(seen.ended[1].detail.error,
            "the run process exited with code 1 before recording a result: cannot record the "
            "samples of run 2: database or disk is full");
}

TEST_F(SchedulerTest, AnOverlongFailureIsCutAtACharacterBoundary) {
  const auto p = prepare(1, "");
  // 1993 ASCII bytes, then a 2-byte character that straddles the cut at 1994
  // (2000 bytes with the " [...]" marker).
  const std::string message = std::string(1993, 'x') + "\xc3\xa9" + std::string(5000, 'y');
  runner::SchedulerOptions o = options({});
  o.body = [message](const runner::RunContext&) -> runner::RunOutcome {
    throw std::runtime_error(message);
  };
  o.max_consecutive_failures = 0;
  Recorder seen;
  (void)runner::run_sweep(p, o, seen);
  ASSERT_EQ(seen.ended.size(), 2u);
  EXPECT_EQ(seen.ended[0].detail.error, std::string(1993, 'x') + " [...]");
}

TEST_F(SchedulerTest, ADistributedSweepRefusesInProcessRuns) {
  runner::PreparedExperiment distributed = prepare(1, "");
  distributed.trials[1].experiment.distributed.enabled = true;
  Recorder seen;
  EXPECT_THROW_MSG((void)runner::run_sweep(distributed, options({}), seen), runner::Error,
                   "trial 2 (model.delay_us=1.0) is a [distributed] run, which needs process "
                   "isolation");
  EXPECT_FALSE(fs::exists(dir_ / "runner.db"));  // refused before anything was written
}

TEST_F(SchedulerTest, ADryRunPlanWritesNothing) {
  const auto p = prepare(2);
  runner::SchedulerOptions o = options({});
  o.shard = runner::parse_shard("1/1");
  const auto actions = runner::plan_sweep(p, o);
  ASSERT_EQ(actions.size(), 4u);
  for (const auto& a : actions) EXPECT_EQ(a.skip_reason, "");
  EXPECT_FALSE(fs::exists(dir_ / "runner.db"));
  EXPECT_EQ(calls_, 0);
}

}  // namespace
