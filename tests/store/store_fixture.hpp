// What the store tests share: a fresh directory per test, raw SQL helpers
// (assertions look at the file, not only at the Store API), and writers of
// typical content (a trial, a run, a version-1 file).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>

#include "runner/common/run_kind.hpp"
#include "runner/store/store.hpp"
#include "runner/store/testing.hpp"

namespace store_test {

namespace fs = std::filesystem;
using runner::RunKind;
using runner::store::Phase;
using runner::store::RunStart;
using runner::store::RunStatus;
using runner::store::Sample;
using runner::store::Store;
using runner::store::Summary;
using runner::store::testing::handle;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- raw SQL helpers, so assertions look at the file, not at the Store API --

inline std::string query_text(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
  std::string out;
  if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(stmt, 0);
    out = text != nullptr ? reinterpret_cast<const char*>(text) : "<null>";
  }
  sqlite3_finalize(stmt);
  return out;
}

inline std::int64_t query_int(sqlite3* db, const std::string& sql) {
  return std::stoll(query_text(db, sql));
}

inline double query_real(sqlite3* db, const std::string& sql) { return std::stod(query_text(db, sql)); }

/// Runs raw SQL on a file without going through Store (to fake other writers).
inline void exec_raw(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

inline bool is_iso_utc_millis(const std::string& text) {
  static const std::regex pattern(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  return std::regex_match(text, pattern);
}

/// Each test gets its own directory, removed afterwards (permissions restored
/// first, so a test that made it read-only does not leak it).
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("runner-store-test-" + std::to_string(::getpid()) + "-" + info->name() + "-" +
            std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_path_ = dir_ / "runner.db";
  }

  void TearDown() override {
    std::error_code ec;
    for (const auto& entry : fs::recursive_directory_iterator(dir_, ec))
      fs::permissions(entry.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }

  struct Ids {
    std::int64_t experiment = 0, trial = 0, fingerprint = 0;
  };

  static Ids add_trial(Store& store, const std::string& config_hash = "cfg1") {
    Ids ids;
    ids.experiment = store.upsert_experiment("amp", "/exp/amp.toml", "[experiment]\nname='amp'\n");
    ids.trial = store.upsert_trial(ids.experiment, R"({"lr":0.1})" + config_hash, config_hash,
                                   config_hash, "");
    ids.fingerprint = store.upsert_fingerprint("fp1", R"({"host":"a"})");
    return ids;
  }

  static std::int64_t begin(Store& store, const Ids& ids, RunKind kind = RunKind::train,
                            std::int64_t repeat = 0) {
    RunStart start;
    start.trial_id = ids.trial;
    start.fingerprint_id = ids.fingerprint;
    start.repeat_index = repeat;
    start.kind = kind;
    start.seed = 42;
    start.rank = 0;
    start.load_average = 0.5;
    return store.begin_run(start);
  }

  static Summary summary(const std::string& metric, double p50) {
    Summary s;
    s.metric = metric;
    s.unit = "ns";
    s.n = 10;
    s.mean = p50 + 1;
    s.stddev = 2;
    s.min = p50 - 5;
    s.p50 = p50;
    s.p90 = p50 + 5;
    s.p99 = p50 + 9;
    s.max = p50 + 10;
    return s;
  }

  fs::path dir_;
  fs::path db_path_;
};

/// A sample with the phases written as runner 1 had them (data, forward,
/// backward, optimizer; -1: does not apply) and no h2d or comm.
inline Sample make_sample(std::int64_t step, bool warmup, double wall_ns, double data_ns,
                          double forward_ns, double backward_ns, double optimizer_ns,
                          double loss) {
  Sample s;
  s.step = step;
  s.warmup = warmup;
  s.wall_ns = wall_ns;
  s.phase(Phase::data) = data_ns;
  s.phase(Phase::forward) = forward_ns;
  s.phase(Phase::backward) = backward_ns;
  s.phase(Phase::optimizer) = optimizer_ns;
  s.loss = loss;
  return s;
}

/// Writes a version-1 file the way runner 1 did, with a finished run (with
/// plugins, samples, summaries, metrics) and a running one.
inline void write_v1_file(const fs::path& path) {
  exec_raw(path, std::string(runner::store::testing::migration_sql(1)) +
                     "PRAGMA user_version = 1;"
                     "INSERT INTO experiments (id, name, source_path, source_text, source_sha256) "
                     "  VALUES (1, 'amp', '/exp/amp.toml', 'text', 'sha-text');"
                     "INSERT INTO trials (id, experiment_id, config_json, config_hash) "
                     "  VALUES (1, 1, '{\"lr\":1}', 'cfg1'), (2, 1, '{\"lr\":2}', 'cfg2');"
                     "INSERT INTO fingerprints (id, hash, json) VALUES (1, 'fp1', '{}');"
                     "INSERT INTO runs (id, trial_id, fingerprint_id, repeat_index, kind, status, "
                     "  seed, started_at, finished_at, heartbeat_at) VALUES "
                     "  (1, 1, 1, 0, 'train', 'finished', 7, '2024-01-01T00:00:00.000Z', "
                     "   '2024-01-01T00:00:01.000Z', '2024-01-01T00:00:01.000Z'),"
                     "  (2, 2, NULL, 0, 'train', 'running', 7, '2024-01-01T00:00:02.000Z', NULL, "
                     "   '2024-01-01T00:00:02.000Z');"
                     "INSERT INTO run_plugins VALUES (1, 'model', 'mlp', '/lib/libmlp.so', '1', 'aa');"
                     "INSERT INTO samples (run_id, step, warmup, wall_ns) VALUES "
                     "  (1, 0, 1, 100), (1, 1, 0, 90), (1, 2, 0, 80);"
                     "INSERT INTO summaries (run_id, metric, unit, n, p50) "
                     "  VALUES (1, 'step_time', 'ns', 2, 85);"
                     "INSERT INTO metrics (run_id, name, value, unit) "
                     "  VALUES (1, 'samples_per_s', 1000, '1/s');");
}

inline bool is_uuid(const std::string& text) {
  static const std::regex pattern("[0-9a-f]{32}");
  return std::regex_match(text, pattern);
}

/// Moves a run's heartbeat `seconds` into the past.
inline void age_heartbeat(sqlite3* db, std::int64_t run, int seconds) {
  const std::string sql = "UPDATE runs SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-" +
                          std::to_string(seconds) + " seconds') WHERE id = " + std::to_string(run);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
}

}  // namespace store_test
