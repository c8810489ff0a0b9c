// Execution that survives: crashing, hanging, throwing and diverging runs in
// child processes, resume, stop policy, SIGKILL of the runner, shards.
#include <gtest/gtest.h>

#include <regex>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;
using runner::test::slurp;
using runner::test::spawn;
using runner::test::wait_until;

const fs::path kGood = runner::test::test_plugins("good");
// What a run records when tiny_linear's forward throws: the plugin and its library named.
const std::string kForwardFailed =
    "model plugin 'tiny_linear' (" + fs::canonical(kGood / "runner_plugin_test_good.so").string() +
    ") failed in forward: forward failed on purpose";

class RunTest : public runner::test::CliTestBase {
 protected:
  RunTest() : CliTestBase("runner-run-") {}

  std::string command(const std::string& args) const {
    return runner::test::runner_command(args, {db_, kGood});
  }

  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, kGood});
  }

  // Read while the runner may still be creating or writing the database.
  std::string query(const std::string& sql) const {
    return runner::test::query_text(db_, sql, runner::test::OnDbError::ignore);
  }

  std::string status_of(const std::string& label) {
    return query("SELECT group_concat(status, ',') FROM (SELECT runs.status FROM runs JOIN "
                 "trials ON trials.id = runs.trial_id WHERE trials.label = '" + label +
                 "' ORDER BY runs.id)");
  }
};

// Five trials of one tiny model: one healthy, four that fail in different ways.
const std::string kFailures = runner::test::tiny_experiment({.steps = 10,
                                                             .rest = R"([experiment]
name = "failures"
timeout = "2s"

[[trial]]
"model.nan_at_step" = -1

[[trial]]
"model.crash_at_step" = 3

[[trial]]
"model.hang_at_step" = 3

[[trial]]
"model.throw_at_step" = 3

[[trial]]
"model.nan_at_step" = 3
)"});

TEST_F(RunTest, EachFailureIsRecordedWithItsStatusAndTheSweepGoesOn) {
  const fs::path file = write("failures.toml", kFailures);
  const Result r = runner("run " + file.string());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(status_of("model.nan_at_step=-1"), "finished");
  EXPECT_EQ(status_of("model.crash_at_step=3"), "crashed");
  EXPECT_EQ(status_of("model.hang_at_step=3"), "timeout");
  EXPECT_EQ(status_of("model.throw_at_step=3"), "failed");
  EXPECT_EQ(status_of("model.nan_at_step=3"), "diverged");
  EXPECT_EQ(query("SELECT error || '|' || signal FROM runs WHERE status = 'crashed'"),
            "killed by signal 11 (Segmentation fault)|11");
  EXPECT_EQ(query("SELECT error FROM runs WHERE status = 'timeout'"),
            "exceeded the timeout of 2s and was killed");
  EXPECT_EQ(query("SELECT error FROM runs WHERE status = 'failed'"), kForwardFailed);
  EXPECT_EQ(query("SELECT error FROM runs WHERE status = 'diverged'"), "loss is nan at step 3");
  // What the failing runs measured before failing is kept.
  EXPECT_EQ(query("SELECT count(*) FROM samples JOIN runs ON runs.id = samples.run_id "
                  "WHERE runs.status = 'diverged'"),
            "4");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE fingerprint_id IS NOT NULL"), "5");

  // Resume: nothing is missing, so nothing runs.
  const Result again = runner("run " + file.string());
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "5");
  // A second repetition runs only the new repetitions.
  const Result more = runner("run " + file.string() + " --set experiment.repeats=2");
  EXPECT_EQ(more.code, 1);
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "10");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE repeat_index = 1"), "5");
  // --rerun-failed reruns the eight failed runs only.
  const Result rerun = runner("run " + file.string() + " --set experiment.repeats=2 --rerun-failed --max-consecutive-failures 0");
  EXPECT_EQ(rerun.code, 1);
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "18");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'finished'"), "2");
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");
}

TEST_F(RunTest, ConsecutiveFailuresStopTheSweep) {
  const fs::path file = write("failures.toml", kFailures);
  const Result r = runner("run " + file.string() + " --max-consecutive-failures 2");
  EXPECT_EQ(r.code, 1);
  // finished, crashed, timeout -> stop before the throwing and diverging trials.
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "3");
  EXPECT_NE(r.err.find("stopping: 2 consecutive failed runs (--max-consecutive-failures 2)"),
            std::string::npos)
      << r.err;
  const Result m = runner("run " + file.string() + " --max-failures 1 --rerun-failed");
  EXPECT_EQ(m.code, 1);
  EXPECT_NE(m.err.find("stopping: 1 failed run(s) reached --max-failures 1"), std::string::npos)
      << m.err;
}

TEST_F(RunTest, InProcessRunsRecordTheSameWay) {
  const fs::path file =
      write("ok.toml", runner::test::tiny_experiment({.model = "throw_at_step = 2", .steps = 5}));
  const Result r = runner("run " + file.string() + " --isolate none");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(query("SELECT status || '|' || error FROM runs"), "failed|" + kForwardFailed);
}

TEST_F(RunTest, ARunnerKilledMidSweepLeavesASoundDatabaseAndResumeCompletesIt) {
  const fs::path file = write("long.toml", runner::test::tiny_experiment(
                                              {.steps = 4000, .rest = R"([experiment]
name = "long"
[sweep]
"optimizer.lr" = [0.1, 0.01, 0.001]
)"}));
  const pid_t pid = spawn(command("run " + file.string()) + " >/dev/null 2>&1");
  ASSERT_GE(pid, 0);
  // Wait (bounded) until the second run has started, then kill the runner outright.
  wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(60),
             [&] { return query("SELECT count(*) FROM runs") >= "2"; });
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");

  // At once, without waiting for the heartbeat to go stale, a dry run knows
  // the runner is gone: its running run will be run again, not waited for.
  const Result dry = runner("run " + file.string() + " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_EQ(dry.out.find("in another process"), std::string::npos) << dry.out;
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'running'"), "1");  // not written

  const Result resumed = runner("run " + file.string());
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");
  // Every trial has a finished run; the killed one is recorded as interrupted.
  EXPECT_EQ(query("SELECT count(DISTINCT trial_id) FROM runs WHERE status = 'finished'"), "3");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'running'"), "0");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'interrupted'"),
            query("SELECT count(*) - 3 FROM runs"));
}

TEST_F(RunTest, RunnersStartedTogetherOnOneStoreRunEachRepetitionOnce) {
  // 3 trials x 4 repetitions, each run long enough that four runners overlap.
  const fs::path file = write("shared.toml", runner::test::tiny_experiment(
                                                 {.model = "delay_us = 2000.0", .steps = 40,
                                                  .rest = R"([experiment]
name = "shared"
repeats = 4
[sweep]
"optimizer.lr" = [0.1, 0.01, 0.001]
)"}));
  std::vector<pid_t> runners;
  std::vector<fs::path> logs;
  for (int i = 0; i < 4; ++i) {
    logs.push_back(dir_ / ("runner-" + std::to_string(i) + ".log"));
    runners.push_back(spawn(command("run " + file.string()) + " >" + logs.back().string() + " 2>&1"));
  }
  for (std::size_t i = 0; i < runners.size(); ++i) {
    ASSERT_GT(runners[i], 0);
    int status = 0;
    ::waitpid(runners[i], &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(logs[i]);
  }
  EXPECT_EQ(query("SELECT count(*) FROM runs"), "12");
  EXPECT_EQ(query("SELECT count(*) FROM (SELECT DISTINCT trial_id, repeat_index FROM runs "
                  "WHERE status = 'finished')"),
            "12");
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");
}

// The state a runner started beside another sees for a moment: the database
// file exists (the other runner created it) but holds no schema yet, as
// nothing or as an SQLite header that only says WAL. Planning reads it as
// "nothing recorded", not as a foreign file.
TEST_F(RunTest, ADatabaseFileAnotherRunnerIsStillCreatingCountsAsEmpty) {
  const fs::path file = write("pair.toml", runner::test::tiny_experiment(
                                              {.steps = 3, .rest = R"([experiment]
repeats = 2
)"}));
  runner::test::write_file(db_, "");
  const Result dry = runner("run " + file.string() + " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("2 of 2 runs would run; nothing was written"), std::string::npos)
      << dry.out;
  EXPECT_EQ(fs::file_size(db_), 0U);
  const Result ran = runner("run " + file.string());
  EXPECT_EQ(ran.code, 0) << ran.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'finished'"), "2");

  fs::remove(db_);
  sqlite3* header_only = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &header_only), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(header_only, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(header_only);
  ASSERT_GT(fs::file_size(db_), 0U);
  const Result again = runner("run " + file.string());
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'finished'"), "2");

  // Other commands still say what the file is.
  fs::remove(db_);
  runner::test::write_file(db_, "");
  const Result runs = runner("runs");
  EXPECT_EQ(runs.code, 2);
  EXPECT_NE(runs.err.find("it is empty"), std::string::npos) << runs.err;
}

TEST_F(RunTest, ShardsSplitTheRunsAndDryRunWritesNothing) {
  const fs::path file = write("sweep.toml", runner::test::tiny_experiment(
                                               {.steps = 3, .rest = R"([experiment]
repeats = 2
[sweep]
"optimizer.lr" = [0.1, 0.01, 0.001]
)"}));
  const Result dry = runner("run " + file.string() + " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("6 of 6 runs would run; nothing was written\n2 repetitions a trial: a "
                         "comparison of two trials cannot reach p < 0.05 (4 is the least, 5+ "
                         "recommended)\n"),
            std::string::npos)
      << dry.out;
  EXPECT_FALSE(fs::exists(db_));
  int total = 0;
  for (int k = 1; k <= 2; ++k) {
    const Result shard = runner("run " + file.string() + " --shard " + std::to_string(k) + "/2");
    EXPECT_EQ(shard.code, 0) << shard.err;
    total = std::stoi(query("SELECT count(*) FROM runs"));
  }
  EXPECT_EQ(total, 6);  // the two shards together ran every run once
  const Result bad = runner("run " + file.string() + " --shard 3/2");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "error: --shard must be K/N with 1 <= K <= N, found '3/2'\n"
                     "hint: e.g. --shard 2/4 runs the second quarter of the runs\n");
}

const std::string kTiny = runner::test::tiny_experiment(
    {.optimizer = "lr = 0.05", .steps = 20, .warmup = 2, .rest = "[experiment]\nname = \"tiny\"\n"});

// The live progress line names the loss and the share of the recent steps
// spent waiting for data, from a forked run process and from a fresh one
// (an [env] variable makes the run exec a new process, which reports over a pipe).
TEST_F(RunTest, TheProgressLineShowsTheLossAndTheDataWaitShare) {
  const std::regex line(
      "info \\[1/1\\] run [0-9]+ trial:1 repeat 0( eta [0-9a-z]+)? step 22/22  loss \\(last 10\\) "
      "[0-9.e+-]+  data wait "
      "[0-9.]+%  [0-9.e+]+ steps/s");
  for (const std::string rest : {"", "[env]\nTEST_FREE_VAR = \"1\"\n"}) {
    fs::remove(db_);
    const fs::path file = write("progress.toml", kTiny + rest);
    const Result r = runner("run " + file.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(std::regex_search(r.err, line)) << rest << "\n" << r.err;
  }
}

TEST_F(RunTest, RerunRunsTheStoredConfigurationAndNamesChangedPlugins) {
  // A private copy of the test plugin, so the test can change its file.
  const fs::path plugins = dir_ / "plugins";
  fs::create_directories(plugins);
  const fs::path lib = plugins / "runner_plugin_test_good.so";
  fs::copy_file(kGood / "runner_plugin_test_good.so", lib);
  const fs::path file = write("tiny.toml", std::string(kTiny) + "[plugins]\npath = \"plugins\"\n");
  // Without --plugin-path: the experiment file names the plugin folder.
  auto run = [&](const std::string& args) {
    return runner::test::run_runner(args, dir_, {db_, {}}).code;
  };
  ASSERT_EQ(run("run " + file.string()), 0) << slurp(dir_ / "err");
  ASSERT_EQ(run("rerun 1"), 0) << slurp(dir_ / "err");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'finished'"), "2");
  // Same configuration, same plugins: the same trial identity, the same loss curve.
  EXPECT_EQ(query("SELECT count(DISTINCT identity) FROM trials"), "1");
  EXPECT_EQ(query("SELECT count(DISTINCT config_hash) FROM trials"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM (SELECT step, count(DISTINCT loss) AS n FROM samples "
                  "GROUP BY step) WHERE n > 1"),
            "0");

  // Change the library file (appended bytes do not stop it from loading).
  const std::string old_sha = query("SELECT sha256 FROM run_plugins WHERE name = 'tiny_linear'");
  std::ofstream(lib, std::ios::app) << "changed";
  ASSERT_EQ(run("rerun 1"), 0) << slurp(dir_ / "err");
  const std::string err = slurp(dir_ / "err");
  EXPECT_NE(err.find("model plugin 'tiny_linear' changed since run 1: " + lib.string() + " was " +
                     old_sha.substr(0, 12)),
            std::string::npos)
      << err;
  EXPECT_EQ(query("SELECT count(DISTINCT identity) FROM trials"), "2");

  EXPECT_EQ(run("rerun 42"), 2);
  EXPECT_EQ(slurp(dir_ / "err"), "error: run 42 is not in " + db_.string() +
                                     "\nhint: run 'runner runs' to list the recorded runs\n");
}

TEST_F(RunTest, CtrlCStopsTheRunCleanlyAndASecondOneKillsIt) {
  std::string text = kTiny;
  text.replace(text.find("steps = 20"), 10, "steps = 1000000");
  const fs::path file = write("forever.toml", text);
  const pid_t pid = spawn(command("run " + file.string()) + " >/dev/null 2>" +
                          (dir_ / "err").string());
  ASSERT_GT(pid, 0);
  // Bounded wait until steps are being taken: the run reports progress (on
  // stderr, every two seconds) only from inside its loop.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  wait_until(deadline, [&] { return slurp(dir_ / "err").find(" step ") != std::string::npos; });
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(query("SELECT status FROM runs"), "interrupted");
  EXPECT_NE(slurp(dir_ / "err").find("interrupted: 1 of 1 runs done; run the same command again "
                                     "to resume"),
            std::string::npos);
  EXPECT_EQ(query("SELECT substr(error, 1, 22) FROM runs"), "interrupted before ste");
  EXPECT_EQ(query("SELECT count(*) > 0 FROM samples"), "1");  // what was measured is kept

  // A plugin that hangs never sees the polite request; the second interrupt
  // kills it. (SIGINT then SIGTERM: two different signals are never merged
  // into one delivery, two SIGINTs sent back to back can be.)
  const std::string hang = runner::test::tiny_experiment(
      {.model = "hang_in_factory = true", .optimizer = "lr = 0.05", .steps = 20, .warmup = 2,
       .rest = "[experiment]\nname = \"tiny\"\n"});
  const fs::path hung = write("hang.toml", hang);
  const pid_t second = spawn(command("run " + hung.string()) + " >/dev/null 2>/dev/null");
  wait_until(deadline, [&] {
    return query("SELECT count(*) FROM runs WHERE fingerprint_id IS NOT NULL") == "2";
  });
  ASSERT_EQ(::kill(second, SIGINT), 0);
  ASSERT_EQ(::kill(second, SIGTERM), 0);
  ::waitpid(second, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(query("SELECT status || '|' || error FROM runs ORDER BY id DESC LIMIT 1"),
            "interrupted|killed by a second interrupt");
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");
}

// --- data-parallel runs -----------------------------------------------------------

TEST_F(RunTest, ADistributedSweepRecordsTheCommPhaseAndNamesAFailingRank) {
  // Trial 1: two healthy ranks; trial 2: rank 1 throws at its fourth step.
  const fs::path file = write("dp.toml", std::string(kTiny) +
                                             "[device]\nthreads = 1\n"
                                             "[distributed]\nworld_size = 2\ntimeout = 30\n"
                                             "[[trial]]\n"
                                             "[[trial]]\n\"model.throw_at_step\" = 3\n"
                                             "\"model.fail_rank\" = 1\n");
  const Result r = runner("run " + file.string());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(query("SELECT group_concat(status, ',') FROM (SELECT status FROM runs ORDER BY id)"),
            "finished,failed");
  const std::string error = query("SELECT error FROM runs WHERE id = 2");
  const std::string expected = "rank 1 (host ";
  EXPECT_EQ(error.substr(0, expected.size()), expected) << error;
  EXPECT_NE(error.find(") failed: " + kForwardFailed + " (rank 0: "), std::string::npos) << error;
  // The healthy run: every measured step has a comm phase, and the hook's library is recorded.
  EXPECT_EQ(query("SELECT count(*) FROM samples WHERE run_id = 1 AND warmup = 0 AND comm_ns > 0"),
            "20");
  EXPECT_EQ(query("SELECT n FROM summaries WHERE run_id = 1 AND metric = 'comm'"), "20");
  EXPECT_EQ(query("SELECT value FROM metrics WHERE run_id = 1 AND name = 'world_size'"), "2.0");
  EXPECT_EQ(query("SELECT name FROM run_plugins WHERE run_id = 1 AND kind = 'comm_hook'"),
            "allreduce");
  const Result show = runner("show 1");
  EXPECT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("\ncomm "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("comm_hook  allreduce"), std::string::npos) << show.out;
}

TEST_F(RunTest, EightRanksShutDownWithoutRacingAndEveryRunFinishes) {
  // Twenty short runs of eight ranks: the teardown (rank 0 kills the others
  // once its last step is done) used to let a rank see a killed sibling's
  // closed connection and fail runs that had measured every step.
  const fs::path file = write("dp8.toml", std::string(kTiny) +
                                              "[device]\nthreads = 1\n"
                                              "[distributed]\nworld_size = 8\ntimeout = 60\n");
  const Result r = runner("run " + file.string() +
                          " --set experiment.repeats=20 --set train.steps=5 --set train.warmup=0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query("SELECT count(*) || ' ' || group_concat(DISTINCT status) FROM runs"),
            "20 finished");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE error IS NOT NULL"), "0");
}

TEST_F(RunTest, ADistributedRunRefusesToRunInProcess) {
  const fs::path file = write("dp.toml", std::string(kTiny) + "[distributed]\n");
  const Result r = runner("run " + file.string() + " --isolate none");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "error: trial 1 is a [distributed] run, which needs process isolation\n"
            "hint: drop --isolate none: the other ranks are forked from the run process before it "
            "runs any operator, which only a fresh run process guarantees\n");
  EXPECT_FALSE(fs::exists(db_));
}

}  // namespace
