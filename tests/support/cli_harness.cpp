#include "support/cli_harness.hpp"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace runner::test {

fs::path runner_executable() { return fs::path(RUNNER_BINARY_DIR) / "bin" / "runner"; }

fs::path test_plugins(const std::string& name) {
  return fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / name;
}

std::string runner_command(const std::string& args, const RunnerPaths& paths) {
  std::string cmd = "env -u RUNNER_DB -u RUNNER_PLUGIN_PATH " + runner_executable().string() +
                    " " + args;
  if (!paths.db.empty()) cmd += " --db " + paths.db.string();
  if (!paths.plugin_path.empty()) cmd += " --plugin-path " + paths.plugin_path.string();
  return cmd;
}

Result run_runner(const std::string& args, const fs::path& capture_dir, const RunnerPaths& paths) {
  const fs::path out = capture_dir / "out", err = capture_dir / "err";
  const std::string cmd = runner_command(args, paths) + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

pid_t spawn(const std::string& command) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

void wait_until(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) {
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

namespace {

// Runs `sql` and hands its first row, if any, to `read`.
void query_first_row(const fs::path& path, const std::string& sql, OnDbError on_error,
                     const std::function<void(sqlite3_stmt*)>& read) {
  sqlite3* db = nullptr;
  const int opened = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* stmt = nullptr;
  const int prepared = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (on_error == OnDbError::fail) {
    EXPECT_EQ(opened, SQLITE_OK) << path;
    EXPECT_EQ(prepared, SQLITE_OK) << sql;
  }
  if (prepared == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) read(stmt);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

}  // namespace

std::int64_t query_int(const fs::path& db, const std::string& sql, OnDbError on_error) {
  std::int64_t value = -1;
  query_first_row(db, sql, on_error,
                  [&](sqlite3_stmt* stmt) { value = sqlite3_column_int64(stmt, 0); });
  return value;
}

std::string query_text(const fs::path& db, const std::string& sql, OnDbError on_error) {
  std::string value;
  query_first_row(db, sql, on_error, [&](sqlite3_stmt* stmt) {
    if (const unsigned char* text = sqlite3_column_text(stmt, 0))
      value = reinterpret_cast<const char*>(text);
  });
  return value;
}

TempDir::TempDir(const std::string& prefix)
    : path_(fs::temp_directory_path() / (prefix + std::to_string(std::random_device{}()))) {
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;  // a destructor must not throw
  fs::remove_all(path_, ignored);
}

std::string value_position(const fs::path& file, const std::string& assignment) {
  std::ifstream in(file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number)
    if (const auto at = line.find(assignment); at != std::string::npos)
      return std::to_string(number) + ":" + std::to_string(at + assignment.find(" = ") + 3 + 1);
  ADD_FAILURE() << assignment << " is not in " << file;
  return "";
}

void CliTestBase::expect_refused(const fs::path& file, const std::string& assignment,
                                 const std::string& message, const fs::path& plugins) const {
  for (const std::string command : {"run", "validate"}) {
    const Result r = run_runner(command + " " + file.string(), dir_, {db_, plugins});
    EXPECT_EQ(r.code, 2) << command << "\n" << r.err;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
              "error: " + file.string() + ":" + value_position(file, assignment) + ": " + message)
        << command;
    EXPECT_FALSE(fs::exists(db_) && query_int(db_, "SELECT count(*) FROM runs") > 0) << command;
  }
}

fs::path TempDir::write(const std::string& name, const std::string& text) const {
  return write_file(path_ / name, text);
}

std::string tiny_experiment(const TinyExperiment& e) {
  auto lines = [](const std::string& text) {
    return text.empty() || text.back() == '\n' ? text : text + "\n";
  };
  return "[model]\nplugin = \"tiny_linear\"\n" + lines(e.model) +
         "[data]\nplugin = \"tiny_data\"\nbatch_size = 8\n"
         "[optimizer]\nplugin = \"sgd\"\n" + lines(e.optimizer) +
         "[train]\nsteps = " + std::to_string(e.steps) + "\nwarmup = " + std::to_string(e.warmup) +
         "\n" + e.rest;
}

void record_runs_of_every_status(const fs::path& dir, const fs::path& db, int repeats) {
  const fs::path good = test_plugins("good");
  const auto run = [&](const std::string& name, const std::string& text, const fs::path& plugins) {
    return run_runner("run " + write_file(dir / name, text).string(), dir, {db, plugins});
  };
  const std::string repetitions = "repeats = " + std::to_string(repeats) + "\n";
  const Result swept = run("sweep.toml",
                           tiny_experiment({.steps = 30, .warmup = 5,
                                            .rest = "[experiment]\nname = \"sweep\"\n" +
                                                    repetitions +
                                                    "\n[sweep]\n\"optimizer.lr\" = [0.01, 0.05]\n"}),
                           good);
  ASSERT_EQ(swept.code, 0) << swept.err;
  const Result failed = run("failing.toml",
                            tiny_experiment({.model = "throw_at_step = 2", .steps = 20,
                                             .rest = "[experiment]\nname = \"failing\"\n"}),
                            good);
  ASSERT_EQ(failed.code, 1) << failed.err;
  // Ctrl-C while the steps are being taken: an interrupted run with samples.
  const fs::path forever = write_file(
      dir / "forever.toml",
      tiny_experiment({.steps = 1000000, .rest = "[experiment]\nname = \"stopped\"\n"}));
  const fs::path err = dir / "forever.err";
  const pid_t pid = spawn(runner_command("run " + forever.string(), {db, good}) + " >/dev/null 2>" +
                          err.string());
  ASSERT_GT(pid, 0);
  wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(60),
             [&] { return slurp(err).find(" step ") != std::string::npos; });
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 130);
  const Result kernel = run("kernel.toml",
                            "[experiment]\nname = \"kernel\"\nkind = \"kernel\"\n" + repetitions +
                                "\n[kernel]\nplugin = \"good_scale\"\nshape = [64, 33]\n"
                                "calls = 20\nwarmup = 2\nbuffers = 2\n",
                            test_plugins("kernels"));
  ASSERT_EQ(kernel.code, 0) << kernel.err;
}

}  // namespace runner::test
