#include "support/cli_harness.hpp"

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
  return fs::path(RUNNER_BINARY_DIR) / "tests" / "plugins" / name;
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

}  // namespace runner::test
