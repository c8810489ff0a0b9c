// Execution that survives: crashing, hanging, throwing and diverging runs in
// child processes, resume, stop policy, SIGKILL of the runner, shards.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace {

const fs::path kRunner = fs::path(RUNNER_BINARY_DIR) / "bin" / "runner";
const fs::path kGood = fs::path(RUNNER_BINARY_DIR) / "tests" / "plugins" / "good";

struct Result {
  int code = -1;
  std::string out, err;
};

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("runner-run-" + std::to_string(rd()));
    fs::create_directories(dir_);
    db_ = dir_ / "runs.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  std::string command(const std::string& args) const {
    return "env -u RUNNER_DB -u RUNNER_PLUGIN_PATH " + kRunner.string() + " " + args +
           " --db " + db_.string() + " --plugin-path " + kGood.string();
  }

  Result runner(const std::string& args) {
    const std::string cmd = command(args) + " >" + (dir_ / "out").string() + " 2>" +
                            (dir_ / "err").string();
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(dir_ / "out");
    r.err = slurp(dir_ / "err");
    return r;
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string query(const std::string& sql) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(db_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* stmt = nullptr;
    std::string value;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != nullptr)
      value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return value;
  }

  std::string status_of(const std::string& label) {
    return query("SELECT group_concat(status, ',') FROM (SELECT runs.status FROM runs JOIN "
                 "trials ON trials.id = runs.trial_id WHERE trials.label = '" + label +
                 "' ORDER BY runs.id)");
  }

  fs::path dir_, db_;
};

// Five trials of one tiny model: one healthy, four that fail in different ways.
const char* kFailures = R"([experiment]
name = "failures"
timeout = "2s"

[model]
plugin = "tiny_linear"

[data]
plugin = "tiny_data"
batch_size = 8

[optimizer]
plugin = "sgd"

[train]
steps = 10
warmup = 0

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
)";

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
  EXPECT_EQ(query("SELECT error FROM runs WHERE status = 'failed'"),
            "tiny_linear: forward failed on purpose");
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
  const fs::path file = write("ok.toml", R"([model]
plugin = "tiny_linear"
throw_at_step = 2
[data]
plugin = "tiny_data"
batch_size = 8
[optimizer]
plugin = "sgd"
[train]
steps = 5
warmup = 0
)");
  const Result r = runner("run " + file.string() + " --isolate none");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(query("SELECT status || '|' || error FROM runs"),
            "failed|tiny_linear: forward failed on purpose");
}

TEST_F(RunTest, ARunnerKilledMidSweepLeavesASoundDatabaseAndResumeCompletesIt) {
  const fs::path file = write("long.toml", R"([experiment]
name = "long"
[model]
plugin = "tiny_linear"
[data]
plugin = "tiny_data"
batch_size = 8
[optimizer]
plugin = "sgd"
[train]
steps = 4000
warmup = 0
[sweep]
"optimizer.lr" = [0.1, 0.01, 0.001]
)");
  const std::string cmd = command("run " + file.string()) + " >/dev/null 2>&1";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait (bounded) until the second run has started, then kill the runner outright.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (query("SELECT count(*) FROM runs") < "2" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");

  const Result resumed = runner("run " + file.string());
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");
  // Every trial has a finished run; the killed one is recorded as interrupted.
  EXPECT_EQ(query("SELECT count(DISTINCT trial_id) FROM runs WHERE status = 'finished'"), "3");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'running'"), "0");
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'interrupted'"),
            query("SELECT count(*) - 3 FROM runs"));
}

TEST_F(RunTest, ShardsSplitTheRunsAndDryRunWritesNothing) {
  const fs::path file = write("sweep.toml", R"([experiment]
repeats = 2
[model]
plugin = "tiny_linear"
[data]
plugin = "tiny_data"
batch_size = 8
[optimizer]
plugin = "sgd"
[train]
steps = 3
warmup = 0
[sweep]
"optimizer.lr" = [0.1, 0.01, 0.001]
)");
  const Result dry = runner("run " + file.string() + " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("6 of 6 runs would run; nothing was written"), std::string::npos)
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

const char* kTiny = R"([experiment]
name = "tiny"
[model]
plugin = "tiny_linear"
[data]
plugin = "tiny_data"
batch_size = 8
[optimizer]
plugin = "sgd"
lr = 0.05
[train]
steps = 20
warmup = 2
)";

TEST_F(RunTest, RerunRunsTheStoredConfigurationAndNamesChangedPlugins) {
  // A private copy of the test plugin, so the test can change its file.
  const fs::path plugins = dir_ / "plugins";
  fs::create_directories(plugins);
  const fs::path lib = plugins / "runner_plugin_test_good.so";
  fs::copy_file(kGood / "runner_plugin_test_good.so", lib);
  const fs::path file = write("tiny.toml", std::string(kTiny) + "[plugins]\npath = \"plugins\"\n");
  auto run = [&](const std::string& args) {
    const std::string cmd = "env -u RUNNER_DB -u RUNNER_PLUGIN_PATH " + kRunner.string() + " " +
                            args + " --db " + db_.string() + " >" + (dir_ / "out").string() +
                            " 2>" + (dir_ / "err").string();
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

// Starts the runner in the background; returns its pid.
pid_t spawn(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST_F(RunTest, CtrlCStopsTheRunCleanlyAndASecondOneKillsIt) {
  std::string text = kTiny;
  text.replace(text.find("steps = 20"), 10, "steps = 100000000");
  const fs::path file = write("forever.toml", text);
  const pid_t pid = spawn(command("run " + file.string()) + " >/dev/null 2>" +
                          (dir_ / "err").string());
  ASSERT_GT(pid, 0);
  // Bounded wait until steps are being taken: the run reports progress (on
  // stderr, every two seconds) only from inside its loop.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (slurp(dir_ / "err").find(" step ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
  std::string hang = kTiny;
  hang.replace(hang.find("plugin = \"tiny_linear\""), 22,
               "plugin = \"tiny_linear\"\nhang_in_factory = true");
  const fs::path hung = write("hang.toml", hang);
  const pid_t second = spawn(command("run " + hung.string()) + " >/dev/null 2>/dev/null");
  while (query("SELECT count(*) FROM runs WHERE fingerprint_id IS NOT NULL") != "2" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(::kill(second, SIGINT), 0);
  ASSERT_EQ(::kill(second, SIGTERM), 0);
  ::waitpid(second, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_EQ(query("SELECT status || '|' || error FROM runs ORDER BY id DESC LIMIT 1"),
            "interrupted|killed by a second interrupt");
  EXPECT_EQ(query("PRAGMA integrity_check"), "ok");
}

}  // namespace
