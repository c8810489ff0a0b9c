// What the end-to-end CLI tests (tests/cli/*_test.cpp) share: running the
// runner executable of this build tree and capturing what it did, reading
// files and SQLite databases it wrote, and temporary directories to run in.
//
//   class MyCliTest : public runner::test::CliTestBase {
//    protected:
//     MyCliTest() : CliTestBase("runner-my-") {}
//   };
//   TEST_F(MyCliTest, Runs) {
//     const fs::path file = write("x.toml", "...");
//     const auto r = runner::test::run_runner("run " + file.string(), dir_, {db_});
//     EXPECT_EQ(r.code, 0) << r.err;
//     EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM runs"), 1);
//   }
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace runner::test {

namespace fs = std::filesystem;

/// The runner executable of this build tree.
fs::path runner_executable();

/// The folder of the test plugin set `name` built by tests/support/plugins ("good", "bad_abi", ...).
fs::path test_plugins(const std::string& name);

/// What one invocation did: its exit code (-1 if it did not exit normally) and both streams.
struct Result {
  int code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// Where the runner keeps its data; an empty path adds no flag.
struct RunnerPaths {
  fs::path db;           ///< passed as --db
  fs::path plugin_path;  ///< passed as --plugin-path
};

/// The shell command that runs the runner with `args` (already shell-quoted)
/// and then `paths` as flags; RUNNER_DB and RUNNER_PLUGIN_PATH are unset so
/// only the command line counts.
std::string runner_command(const std::string& args, const RunnerPaths& paths = {});

/// Runs the runner as runner_command() does and waits for it; stdout and
/// stderr go to the files `out` and `err` in `capture_dir`, which stay there.
Result run_runner(const std::string& args, const fs::path& capture_dir,
                  const RunnerPaths& paths = {});

/// Starts `command` through /bin/sh in the background; returns its pid
/// (the shell execs the command, so a signal to the pid reaches it).
pid_t spawn(const std::string& command);

/// Calls `done` every 20 ms until it returns true or `deadline` passes; the
/// caller checks afterwards what it waited for.
void wait_until(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done);

/// The whole content of a file; empty if it cannot be read.
std::string slurp(const fs::path& path);

/// Writes `text` to `path`, replacing it; returns `path`.
fs::path write_file(const fs::path& path, const std::string& text);

/// What a query does when the database cannot be opened or the statement
/// not prepared: record a test failure, or (to poll a database that another
/// process may not have created yet) quietly give the "no row" value.
enum class OnDbError { fail, ignore };

/// The first column of the first row of `sql` on the database `db` (opened
/// read-only, waiting up to 5 s for a writer's lock); -1 if there is no row.
std::int64_t query_int(const fs::path& db, const std::string& sql,
                       OnDbError on_error = OnDbError::fail);

/// As query_int(), as text; empty if there is no row or the value is NULL.
std::string query_text(const fs::path& db, const std::string& sql,
                       OnDbError on_error = OnDbError::fail);

/// An experiment on the test plugins (tests/support/plugins/good_plugin.cpp).
struct TinyExperiment {
  // (Initialised members, so designated initialisers may leave any out without a warning.)
  std::string model = "";      ///< TOML lines added to [model] (tiny_linear), e.g. "throw_at_step = 2"
  std::string optimizer = "";  ///< TOML lines added to [optimizer] (sgd), e.g. "lr = 0.05"
  int steps = 20;              ///< [train] steps
  int warmup = 0;              ///< [train] warmup
  std::string rest = "";       ///< more tables after [train]: [experiment], [sweep], [[trial]], ...
};
/// Its text: [model] tiny_linear, [data] tiny_data with batch_size 8,
/// [optimizer] sgd, [train], then `rest`.
std::string tiny_experiment(const TinyExperiment& e);

/// "line:col" of the value in the first line of `file` that contains
/// `assignment` ("key = value"), as runner's messages give it.
std::string value_position(const fs::path& file, const std::string& assignment);

/// Records, in the database `db` (files and captures in `dir`), runs of every
/// status as `runner report` and `runner export` tests read them: experiment
/// "sweep" (test plugins, optimizer.lr swept over 0.01 and 0.05, 30 steps
/// after 5 warm-up, `repeats` repetitions: finished), "failing" (forward
/// throws at step 2: failed), "stopped" (Ctrl-C while its steps are taken:
/// interrupted, with samples) and "kernel" (kernel good_scale of the kernels
/// test plugins, `repeats` repetitions). Records a fatal test failure when a
/// run does not end as described.
void record_runs_of_every_status(const fs::path& dir, const fs::path& db, int repeats);

/// A fresh directory under the system's temporary folder, named `prefix`
/// and a random number, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory itself.
  const fs::path& path() const { return path_; }
  /// Writes `text` to the file `name` in this directory; returns its path.
  fs::path write(const std::string& name, const std::string& text) const;

 private:
  fs::path path_;
};

/// Base of the CLI test fixtures: each test gets its own temporary directory
/// `dir_` and a database path `db_` in it that nothing has created yet.
class CliTestBase : public ::testing::Test {
 protected:
  /// `prefix` starts the directory's name, so a leftover one tells which suite left it.
  explicit CliTestBase(const std::string& prefix) : tmp_(prefix) {}

  /// Writes `text` to the file `name` in `dir_`; returns its path.
  fs::path write(const std::string& name, const std::string& text) const {
    return tmp_.write(name, text);
  }

  /// `runner run` and `runner validate` of `file` both exit 2 with
  /// "error: FILE:LINE:COL: `message`" as the first line of stderr, where
  /// LINE:COL is the value of the first line holding `assignment` ("key =
  /// value"), and record no run. `plugins` is passed as --plugin-path.
  void expect_refused(const fs::path& file, const std::string& assignment,
                      const std::string& message, const fs::path& plugins = {}) const;

  TempDir tmp_;
  fs::path dir_ = tmp_.path();
  fs::path db_ = dir_ / "runs.db";
};

}  // namespace runner::test
