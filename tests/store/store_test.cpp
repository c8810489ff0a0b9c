#include "runner/store/store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace fs = std::filesystem;
using runner::Error;
using runner::ErrorKind;
using runner::store::Metric;
using runner::store::PluginRecord;
using runner::store::RunStart;
using runner::store::Sample;
using runner::store::Store;
using runner::store::Summary;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kWritableHint = "choose a writable path with --db PATH or RUNNER_DB";

// --- raw SQL helpers, so assertions look at the file, not at the Store API --

std::string query_text(sqlite3* db, const std::string& sql) {
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

std::int64_t query_int(sqlite3* db, const std::string& sql) {
  return std::stoll(query_text(db, sql));
}

double query_real(sqlite3* db, const std::string& sql) { return std::stod(query_text(db, sql)); }

/// Runs raw SQL on a file without going through Store (to fake other writers).
void exec_raw(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

bool is_iso_utc_millis(const std::string& text) {
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

  static std::int64_t begin(Store& store, const Ids& ids, const std::string& kind = "train",
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

// --- opening and migration ------------------------------------------------

TEST_F(StoreTest, FreshFileIsMigratedInWalModeWithForeignKeys) {
  Store store = Store::open(db_path_);
  sqlite3* db = store.handle();
  EXPECT_EQ(store.schema_version(), runner::store::kSchemaVersion);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), runner::store::kSchemaVersion);
  EXPECT_EQ(query_text(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_int(db, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(query_int(db, "PRAGMA busy_timeout"), 5000);
  EXPECT_EQ(query_int(db, "PRAGMA synchronous"), 1);  // NORMAL
  for (const char* table : {"experiments", "trials", "fingerprints", "runs", "run_plugins",
                            "samples", "summaries", "metrics"}) {
    EXPECT_EQ(query_int(db, std::string("SELECT count(*) FROM sqlite_schema WHERE type = "
                                        "'table' AND name = '") + table + "'"),
              1)
        << table;
  }
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND name IN "
                          "('run_overview', 'run_summaries')"),
            2);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name IN "
                          "('runs_trial_id', 'runs_status')"),
            2);
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, ReopeningKeepsDataAndDoesNotMigrateAgain) {
  std::int64_t experiment = 0;
  {
    Store store = Store::open(db_path_);
    experiment = store.upsert_experiment("amp", "amp.toml", "text");
  }
  Store store = Store::open(db_path_);
  EXPECT_EQ(store.schema_version(), runner::store::kSchemaVersion);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(store.upsert_experiment("amp", "amp.toml", "text"), experiment);
}

TEST_F(StoreTest, NewerSchemaVersionIsRejected) {
  exec_raw(db_path_, "CREATE TABLE future (x); PRAGMA user_version = 7;");
  const std::string expected = "database '" + db_path_.string() +
                               "' has schema version 7, newer than this runner supports (3)";
  EXPECT_THROW_MSG(Store::open(db_path_), Error, expected);
  EXPECT_THROW_MSG(Store::open_read_only(db_path_), Error, expected);
  try {
    Store::open(db_path_);
  } catch (const Error& e) {
    EXPECT_EQ(e.hint(), "upgrade runner, or use another database with --db");
    EXPECT_EQ(e.kind(), ErrorKind::input);
  }
  // Rejected before touching anything.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), 7);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM sqlite_schema"), 1);
  sqlite3_close(db);
}

TEST_F(StoreTest, NotADatabaseFileIsRejected) {
  const std::string contents(200, 'x');
  std::ofstream(db_path_) << contents;
  EXPECT_THROW_MSG(Store::open(db_path_), Error,
                   "'" + db_path_.string() + "' is not a runner database: file is not a database");
  EXPECT_THROW_MSG(Store::open_read_only(db_path_), Error,
                   "'" + db_path_.string() + "' is not a runner database: file is not a database");
  std::ifstream in(db_path_);
  const std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, contents);
}

TEST_F(StoreTest, OtherApplicationsDatabaseIsRejected) {
  exec_raw(db_path_, "CREATE TABLE experiments (something_else TEXT);");
  EXPECT_THROW_MSG(Store::open(db_path_), Error,
                   "'" + db_path_.string() +
                       "' is not a runner database: it has tables but no runner schema version");
}

TEST_F(StoreTest, EmptyFileBecomesAStore) {
  std::ofstream(db_path_).close();
  Store store = Store::open(db_path_);
  EXPECT_EQ(store.schema_version(), runner::store::kSchemaVersion);
}

TEST_F(StoreTest, OpenReadOnlyMissingFileCreatesNothing) {
  try {
    Store::open_read_only(db_path_);
    ADD_FAILURE() << "expected open_read_only to throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "database '" + db_path_.string() + "' does not exist");
    EXPECT_EQ(e.hint(), "run an experiment first with 'runner run FILE', or pass --db PATH");
    EXPECT_EQ(e.kind(), ErrorKind::input);
  }
  EXPECT_FALSE(fs::exists(db_path_));
}

TEST_F(StoreTest, OpenReadOnlyReadsButDoesNotWrite) {
  std::int64_t run = 0;
  {
    Store store = Store::open(db_path_);
    run = begin(store, add_trial(store));
  }
  Store reader = Store::open_read_only(db_path_);
  EXPECT_EQ(reader.schema_version(), runner::store::kSchemaVersion);
  ASSERT_EQ(reader.list_runs().size(), 1U);
  EXPECT_EQ(reader.list_runs()[0].id, run);
  try {
    reader.heartbeat(run);
    ADD_FAILURE() << "expected a write on a read-only store to throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot update the heartbeat of run " + std::to_string(run) +
                                         ": attempt to write a readonly database");
    EXPECT_EQ(e.kind(), ErrorKind::run);
  }
}

TEST_F(StoreTest, StoreIsMovable) {
  Store a = Store::open(db_path_);
  sqlite3* handle = a.handle();
  Store b(std::move(a));
  EXPECT_EQ(b.handle(), handle);
  EXPECT_EQ(a.handle(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  Store c = Store::open(dir_ / "other.db");
  c = std::move(b);
  EXPECT_EQ(c.handle(), handle);
  EXPECT_EQ(c.schema_version(), runner::store::kSchemaVersion);
}

TEST_F(StoreTest, TwoConnectionsSeeEachOthersCommits) {
  Store writer = Store::open(db_path_);
  Store second = Store::open(db_path_);
  const auto ids = add_trial(writer);
  begin(writer, ids);
  EXPECT_EQ(second.list_runs().size(), 1U);
  EXPECT_EQ(add_trial(second).trial, ids.trial);
}

// --- check_writable -------------------------------------------------------

TEST_F(StoreTest, CheckWritableAcceptsNewFileInWritableDirectoryAndCreatesNothing) {
  EXPECT_NO_THROW(Store::check_writable(db_path_));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(StoreTest, CheckWritableAcceptsExistingStore) {
  { Store store = Store::open(db_path_); }
  EXPECT_NO_THROW(Store::check_writable(db_path_));
}

TEST_F(StoreTest, CheckWritableRejectsMissingDirectory) {
  const fs::path path = dir_ / "missing" / "runner.db";
  const std::string expected =
      "cannot write database '" + path.string() + "': No such file or directory";
  EXPECT_THROW_MSG(Store::check_writable(path), Error, expected);
  EXPECT_THROW_MSG(Store::open(path), Error, expected);
  try {
    Store::check_writable(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.hint(), kWritableHint);
    EXPECT_EQ(e.kind(), ErrorKind::input);
  }
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(StoreTest, CheckWritableRejectsDirectory) {
  EXPECT_THROW_MSG(Store::check_writable(dir_), Error,
                   "cannot write database '" + dir_.string() + "': Is a directory");
}

TEST_F(StoreTest, CheckWritableRejectsReadOnlyDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes through permission bits";
  const fs::path ro = dir_ / "ro";
  fs::create_directory(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  const fs::path path = ro / "runner.db";
  const std::string expected = "cannot write database '" + path.string() + "': Permission denied";
  EXPECT_THROW_MSG(Store::check_writable(path), Error, expected);
  EXPECT_THROW_MSG(Store::open(path), Error, expected);
  EXPECT_TRUE(fs::is_empty(ro));
}

TEST_F(StoreTest, CheckWritableRejectsReadOnlyFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes through permission bits";
  { Store store = Store::open(db_path_); }
  fs::permissions(db_path_, fs::perms::owner_read);
  const std::string expected =
      "cannot write database '" + db_path_.string() + "': Permission denied";
  EXPECT_THROW_MSG(Store::check_writable(db_path_), Error, expected);
  EXPECT_THROW_MSG(Store::open(db_path_), Error, expected);
}

// --- writing --------------------------------------------------------------

TEST_F(StoreTest, UpsertsAreIdempotent) {
  Store store = Store::open(db_path_);
  const std::int64_t e1 = store.upsert_experiment("amp", "/a/amp.toml", "text v1");
  // Identity is name + source text; the path it was read from does not matter.
  EXPECT_EQ(store.upsert_experiment("amp", "/b/amp.toml", "text v1"), e1);
  const std::int64_t e2 = store.upsert_experiment("amp", "/a/amp.toml", "text v2");
  EXPECT_NE(e2, e1);
  EXPECT_NE(store.upsert_experiment("other", "/a/amp.toml", "text v1"), e1);
  EXPECT_EQ(query_text(store.handle(), "SELECT source_sha256 FROM experiments WHERE id = " +
                                           std::to_string(e1)),
            runner::sha256_hex("text v1"));
  EXPECT_EQ(query_text(store.handle(), "SELECT source_path FROM experiments WHERE id = " +
                                           std::to_string(e1)),
            "/a/amp.toml");

  const std::int64_t t1 = store.upsert_trial(e1, R"({"lr":1})", "h1", "id1", "lr=1");
  EXPECT_EQ(store.upsert_trial(e1, R"({"lr":1})", "h1", "id1", "lr=1"), t1);
  EXPECT_NE(store.upsert_trial(e1, R"({"lr":2})", "h2", "id2", "lr=2"), t1);
  EXPECT_NE(store.upsert_trial(e2, R"({"lr":1})", "h1", "id1", "lr=1"), t1);

  const std::int64_t f1 = store.upsert_fingerprint("fp", "{}");
  EXPECT_EQ(store.upsert_fingerprint("fp", "{}"), f1);
  EXPECT_NE(store.upsert_fingerprint("fp2", "{}"), f1);

  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM experiments"), 3);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM trials"), 3);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM fingerprints"), 2);
  EXPECT_TRUE(is_iso_utc_millis(query_text(store.handle(), "SELECT created_at FROM trials")));
}

TEST_F(StoreTest, SameHashWithDifferentContentIsRejected) {
  Store store = Store::open(db_path_);
  const std::int64_t e = store.upsert_experiment("amp", "", "text");
  store.upsert_trial(e, R"({"lr":1})", "h1", "id1", "");
  EXPECT_THROW_MSG(store.upsert_trial(e, R"({"lr":2})", "h1", "id1", ""), Error,
                   "trial id1 is already stored with a different configuration");
  EXPECT_THROW_MSG(store.upsert_trial(e, R"({"lr":1})", "h2", "id1", ""), Error,
                   "trial id1 is already stored with a different configuration");
  store.upsert_fingerprint("fp", "{}");
  EXPECT_THROW_MSG(store.upsert_fingerprint("fp", R"({"x":1})"), Error,
                   "fingerprint fp is already stored with different contents");
}

TEST_F(StoreTest, ForeignKeysAreEnforced) {
  Store store = Store::open(db_path_);
  RunStart start;
  start.trial_id = 999;
  start.kind = "train";
  EXPECT_THROW_MSG(store.begin_run(start), Error,
                   "cannot record the start of a run: FOREIGN KEY constraint failed");
  EXPECT_THROW_MSG(store.add_samples(12345, {Sample{}}), Error,
                   "cannot record the samples of run 12345: FOREIGN KEY constraint failed");
}

TEST_F(StoreTest, FullRunLifecycleRoundTrips) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  ASSERT_GT(run, 0);
  {
    const auto detail = store.get_run(run);
    ASSERT_TRUE(detail.has_value());
    EXPECT_EQ(detail->row.status, "running");
    EXPECT_EQ(detail->row.finished_at, "");
    EXPECT_TRUE(is_iso_utc_millis(detail->row.started_at)) << detail->row.started_at;
    EXPECT_FALSE(detail->row.headline.has_value());
  }

  store.add_plugins(run, {{"model", "mlp", "/lib/libmlp.so", "1.0", "aa"},
                          {"optimizer", "sgd", "/lib/libsgd.so", "1.1", "bb"}});

  std::vector<Sample> samples(3);
  samples[0] = {0, true, 100, 10, 40, 30, 20, 2.5};
  samples[1] = {1, false, 90, -1, 35, 30, -1, kNaN};  // no data wait, no optimizer, no loss
  samples[2] = {2, false, 80, 5, 30, 25, 20, 1.5};
  store.add_samples(run, samples);
  EXPECT_EQ(query_int(store.handle(),
                      "SELECT count(*) FROM samples WHERE data_ns IS NULL AND optimizer_ns IS "
                      "NULL AND loss IS NULL AND step = 1"),
            1);
  store.heartbeat(run);

  store.finish_run(run, "finished", "", {summary("step_time", 85), summary("forward", 32)},
                   {{"samples_per_s", 1234.5, "1/s"}, {"final_loss", 1.5, ""}});

  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->row.id, run);
  EXPECT_EQ(detail->row.experiment, "amp");
  EXPECT_EQ(detail->row.trial_id, ids.trial);
  EXPECT_EQ(detail->row.repeat_index, 0);
  EXPECT_EQ(detail->row.kind, "train");
  EXPECT_EQ(detail->row.status, "finished");
  EXPECT_TRUE(is_iso_utc_millis(detail->row.finished_at)) << detail->row.finished_at;
  EXPECT_GE(detail->row.finished_at, detail->row.started_at);
  ASSERT_TRUE(detail->row.headline.has_value());
  EXPECT_DOUBLE_EQ(*detail->row.headline, 85);
  EXPECT_EQ(detail->error, "");
  EXPECT_EQ(detail->config_json, std::string(R"({"lr":0.1})") + "cfg1");
  EXPECT_EQ(detail->config_hash, "cfg1");
  EXPECT_EQ(detail->fingerprint_json, R"({"host":"a"})");
  EXPECT_EQ(detail->fingerprint_hash, "fp1");
  EXPECT_DOUBLE_EQ(detail->load_average, 0.5);
  EXPECT_EQ(detail->seed, 42);
  EXPECT_EQ(detail->rank, 0);
  ASSERT_EQ(detail->plugins.size(), 2U);
  EXPECT_EQ(detail->plugins[0].kind, "model");
  EXPECT_EQ(detail->plugins[0].name, "mlp");
  EXPECT_EQ(detail->plugins[0].library, "/lib/libmlp.so");
  EXPECT_EQ(detail->plugins[0].version, "1.0");
  EXPECT_EQ(detail->plugins[0].sha256, "aa");
  EXPECT_EQ(detail->plugins[1].name, "sgd");
  ASSERT_EQ(detail->summaries.size(), 2U);  // ordered by metric
  EXPECT_EQ(detail->summaries[0].metric, "forward");
  EXPECT_EQ(detail->summaries[1].metric, "step_time");
  EXPECT_EQ(detail->summaries[1].unit, "ns");
  EXPECT_EQ(detail->summaries[1].n, 10);
  EXPECT_DOUBLE_EQ(detail->summaries[1].mean, 86);
  EXPECT_DOUBLE_EQ(detail->summaries[1].stddev, 2);
  EXPECT_DOUBLE_EQ(detail->summaries[1].min, 80);
  EXPECT_DOUBLE_EQ(detail->summaries[1].p90, 90);
  EXPECT_DOUBLE_EQ(detail->summaries[1].p99, 94);
  EXPECT_DOUBLE_EQ(detail->summaries[1].max, 95);
  ASSERT_EQ(detail->metrics.size(), 2U);  // ordered by name
  EXPECT_EQ(detail->metrics[0].name, "final_loss");
  EXPECT_EQ(detail->metrics[1].name, "samples_per_s");
  EXPECT_DOUBLE_EQ(detail->metrics[1].value, 1234.5);
  EXPECT_EQ(detail->metrics[1].unit, "1/s");
  EXPECT_EQ(detail->sample_count, 3);

  const auto back = store.samples(run);
  ASSERT_EQ(back.size(), 3U);
  EXPECT_TRUE(back[0].warmup);
  EXPECT_FALSE(back[1].warmup);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].step, samples[i].step);
    EXPECT_DOUBLE_EQ(back[i].wall_ns, samples[i].wall_ns);
    EXPECT_DOUBLE_EQ(back[i].data_ns, samples[i].data_ns);
    EXPECT_DOUBLE_EQ(back[i].forward_ns, samples[i].forward_ns);
    EXPECT_DOUBLE_EQ(back[i].backward_ns, samples[i].backward_ns);
    EXPECT_DOUBLE_EQ(back[i].optimizer_ns, samples[i].optimizer_ns);
  }
  EXPECT_DOUBLE_EQ(back[1].data_ns, -1);
  EXPECT_DOUBLE_EQ(back[1].optimizer_ns, -1);
  EXPECT_TRUE(std::isnan(back[1].loss));
  EXPECT_DOUBLE_EQ(back[0].loss, 2.5);

  const auto rows = store.list_runs();
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].id, run);
  EXPECT_EQ(rows[0].status, "finished");
  ASSERT_TRUE(rows[0].headline.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].headline, 85);

  EXPECT_FALSE(store.get_run(run + 100).has_value());
  EXPECT_TRUE(store.samples(run + 100).empty());
  EXPECT_EQ(query_text(store.handle(), "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(store.handle(), "PRAGMA foreign_key_check"), "");
}

TEST_F(StoreTest, RunOverviewViewFlattensARun) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t train = begin(store, ids, "train", 0);
  store.finish_run(train, "finished", "", {summary("step_time", 85), summary("latency", 7)},
                   {{"samples_per_s", 1000, "1/s"}});
  const std::int64_t infer = begin(store, ids, "infer", 1);
  store.finish_run(infer, "failed", "out of memory", {summary("step_time", 3), summary("latency", 7)},
                   {});
  const std::int64_t running = begin(store, ids, "train", 2);

  sqlite3* db = store.handle();
  const std::string where = " FROM run_overview WHERE run_id = ";
  EXPECT_EQ(query_text(db, "SELECT experiment" + where + std::to_string(train)), "amp");
  EXPECT_EQ(query_int(db, "SELECT trial_id" + where + std::to_string(train)), ids.trial);
  EXPECT_EQ(query_text(db, "SELECT config_hash" + where + std::to_string(train)), "cfg1");
  EXPECT_EQ(query_int(db, "SELECT repeat_index" + where + std::to_string(infer)), 1);
  EXPECT_EQ(query_text(db, "SELECT kind" + where + std::to_string(infer)), "infer");
  EXPECT_EQ(query_text(db, "SELECT status" + where + std::to_string(infer)), "failed");
  EXPECT_EQ(query_text(db, "SELECT error" + where + std::to_string(infer)), "out of memory");
  EXPECT_EQ(query_text(db, "SELECT error" + where + std::to_string(train)), "<null>");
  // Headline: step_time for train, latency for infer.
  EXPECT_EQ(query_text(db, "SELECT p50_ns" + where + std::to_string(train)), "85.0");
  EXPECT_EQ(query_text(db, "SELECT p50_ns" + where + std::to_string(infer)), "7.0");
  EXPECT_EQ(query_text(db, "SELECT samples_per_s" + where + std::to_string(train)), "1000.0");
  EXPECT_EQ(query_text(db, "SELECT samples_per_s" + where + std::to_string(infer)), "<null>");
  EXPECT_EQ(query_int(db, "SELECT duration_s >= 0 AND duration_s < 60" + where +
                              std::to_string(train)),
            1);
  EXPECT_EQ(query_text(db, "SELECT duration_s" + where + std::to_string(running)), "<null>");
  EXPECT_EQ(query_text(db, "SELECT finished_at" + where + std::to_string(running)), "<null>");
  // One row per run, even with several summaries and metrics.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_overview"), 3);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_summaries"), 4);
  EXPECT_EQ(query_text(db, "SELECT p50 FROM run_summaries WHERE run_id = " +
                               std::to_string(train) + " AND metric = 'latency'"),
            "7.0");
}

TEST_F(StoreTest, ListRunsNewestFirstWithLimit) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  std::vector<std::int64_t> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(begin(store, ids, "train", i));
  const auto all = store.list_runs();
  ASSERT_EQ(all.size(), 5U);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].id, runs[4 - i]);
  const auto two = store.list_runs(2);
  ASSERT_EQ(two.size(), 2U);
  EXPECT_EQ(two[0].id, runs[4]);
  EXPECT_EQ(two[1].id, runs[3]);
  EXPECT_EQ(two[0].repeat_index, 4);
}

TEST_F(StoreTest, FinishRunIsAllOrNothing) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": ";
  EXPECT_THROW_MSG(store.finish_run(run, "finished", "", {summary("step_time", 1)},
                                    {{"samples_per_s", 1, "1/s"}, {"samples_per_s", 2, "1/s"}}),
                   Error, prefix + "UNIQUE constraint failed: metrics.run_id, metrics.name");
  sqlite3* db = store.handle();
  const std::string id = std::to_string(run);
  EXPECT_EQ(query_text(db, "SELECT status FROM runs WHERE id = " + id), "running");
  EXPECT_EQ(query_text(db, "SELECT finished_at FROM runs WHERE id = " + id), "<null>");
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM summaries"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM metrics"), 0);
  // The connection is usable and the run can still be finished properly.
  store.finish_run(run, "finished", "", {summary("step_time", 1)}, {{"samples_per_s", 1, "1/s"}});
  EXPECT_EQ(store.get_run(run)->row.status, "finished");
}

TEST_F(StoreTest, FinishRunRejectsRunningAndUnknownStatus) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": ";
  const std::string expected =
      "' (expected finished, failed, crashed, timeout, interrupted or diverged)";
  EXPECT_THROW_MSG(store.finish_run(run, "running", "", {}, {}), Error,
                   prefix + "invalid status 'running" + expected);
  EXPECT_THROW_MSG(store.finish_run(run, "done", "", {}, {}), Error,
                   prefix + "invalid status 'done" + expected);
  try {
    store.finish_run(run, "Finished", "", {}, {});
    ADD_FAILURE() << "expected finish_run to throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::run);
  }
  EXPECT_EQ(store.get_run(run)->row.status, "running");
  // The CHECK constraint guards the column for writers that bypass Store.
  EXPECT_NE(sqlite3_exec(store.handle(), "UPDATE runs SET status = 'done'", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
}

TEST_F(StoreTest, FinishRunTwiceOrUnknownRunIsRejected) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  store.finish_run(run, "timeout", "exceeded 60 s", {}, {});
  EXPECT_THROW_MSG(store.finish_run(run, "finished", "", {}, {}), Error,
                   "cannot finish run " + std::to_string(run) +
                       ": it already has status 'timeout'");
  const auto detail = store.get_run(run);
  EXPECT_EQ(detail->row.status, "timeout");
  EXPECT_EQ(detail->error, "exceeded 60 s");
  EXPECT_THROW_MSG(store.finish_run(999, "failed", "", {}, {}), Error,
                   "cannot finish run 999: no such run");
}

TEST_F(StoreTest, EveryFinalStatusIsAccepted) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  for (const char* status : {"finished", "failed", "crashed", "timeout", "interrupted",
                             "diverged"}) {
    const std::int64_t run = begin(store, ids);
    store.finish_run(run, status, "", {}, {});
    EXPECT_EQ(store.get_run(run)->row.status, status);
  }
}

TEST_F(StoreTest, HeartbeatMovesForwardAndUnknownRunIsAnError) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string id = std::to_string(run);
  sqlite3* db = store.handle();
  ASSERT_EQ(sqlite3_exec(db, ("UPDATE runs SET heartbeat_at = '2000-01-01T00:00:00.000Z' WHERE id = " + id).c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  store.heartbeat(run);
  const std::string beat = query_text(db, "SELECT heartbeat_at FROM runs WHERE id = " + id);
  EXPECT_TRUE(is_iso_utc_millis(beat)) << beat;
  EXPECT_GT(beat, "2000-01-01T00:00:00.000Z");
  EXPECT_THROW_MSG(store.heartbeat(999), Error,
                   "cannot update the heartbeat of run 999: no such run");
}

TEST_F(StoreTest, DuplicateSampleStepRollsBackTheWholeBatch) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  std::vector<Sample> samples(3);
  samples[0].step = 0;
  samples[1].step = 1;
  samples[2].step = 1;
  EXPECT_THROW_MSG(store.add_samples(run, samples), Error,
                   "cannot record the samples of run " + std::to_string(run) +
                       ": UNIQUE constraint failed: samples.run_id, samples.step");
  EXPECT_TRUE(store.samples(run).empty());
}

TEST_F(StoreTest, NaNSummaryValuesRoundTrip) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  Summary one = summary("step_time", 5);
  one.n = 1;
  one.stddev = kNaN;
  store.finish_run(run, "finished", "", {one}, {{"flops", kNaN, "1/s"}});
  const auto detail = store.get_run(run);
  ASSERT_EQ(detail->summaries.size(), 1U);
  EXPECT_TRUE(std::isnan(detail->summaries[0].stddev));
  EXPECT_DOUBLE_EQ(detail->summaries[0].p50, 5);
  ASSERT_EQ(detail->metrics.size(), 1U);
  EXPECT_TRUE(std::isnan(detail->metrics[0].value));
}

TEST_F(StoreTest, RunWithoutFingerprintIsRecorded) {
  Store store = Store::open(db_path_);
  Ids ids = add_trial(store);
  ids.fingerprint = 0;
  const std::int64_t run = begin(store, ids);
  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->fingerprint_hash, "");
  EXPECT_EQ(detail->fingerprint_json, "");
}

TEST_F(StoreTest, DeletingAnExperimentCascades) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  store.add_plugins(run, {{"model", "mlp", "/lib/libmlp.so", "1", "aa"}});
  store.add_samples(run, {Sample{}});
  store.finish_run(run, "finished", "", {summary("step_time", 1)}, {{"samples_per_s", 1, ""}});
  sqlite3* db = store.handle();
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM experiments", nullptr, nullptr, nullptr), SQLITE_OK);
  for (const char* table : {"trials", "runs", "run_plugins", "samples", "summaries", "metrics"})
    EXPECT_EQ(query_int(db, std::string("SELECT count(*) FROM ") + table), 0) << table;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM fingerprints"), 1);  // shared, kept
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
}


// --- schema version 2: migration from version 1 ----------------------------

/// Writes a version-1 file the way runner 1 did, with a finished run (with
/// plugins, samples, summaries, metrics) and a running one.
void write_v1_file(const fs::path& path) {
  exec_raw(path, std::string(runner::store::detail::migration_sql(1)) +
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

bool is_uuid(const std::string& text) {
  static const std::regex pattern("[0-9a-f]{32}");
  return std::regex_match(text, pattern);
}

TEST_F(StoreTest, MigratesAVersion1FileKeepingItsData) {
  write_v1_file(db_path_);
  Store store = Store::open(db_path_);
  sqlite3* db = store.handle();
  EXPECT_EQ(store.schema_version(), runner::store::kSchemaVersion);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), runner::store::kSchemaVersion);
  // Enforcement was switched off for the table rebuilds and is on again.
  EXPECT_EQ(query_int(db, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");

  // Nothing lost, ids unchanged, nothing cascaded away by the rebuild.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM trials"), 2);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_plugins"), 1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM samples WHERE run_id = 1"), 3);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM summaries WHERE run_id = 1"), 1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM metrics WHERE run_id = 1"), 1);
  // Version-1 trials are identified by their config hash, without a label.
  EXPECT_EQ(query_text(db, "SELECT identity FROM trials WHERE id = 2"), "cfg2");
  EXPECT_EQ(query_text(db, "SELECT label FROM trials WHERE id = 2"), "<null>");
  EXPECT_EQ(query_text(db, "SELECT pid FROM runs WHERE id = 1"), "<null>");
  EXPECT_EQ(query_text(db, "SELECT signal FROM runs WHERE id = 1"), "<null>");
  const std::string uuid1 = query_text(db, "SELECT uuid FROM runs WHERE id = 1");
  EXPECT_TRUE(is_uuid(uuid1)) << uuid1;
  EXPECT_NE(query_text(db, "SELECT uuid FROM runs WHERE id = 2"), uuid1);

  // The old rows read through the new API and views.
  const auto detail = store.get_run(1);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->row.status, "finished");
  EXPECT_EQ(detail->identity, "cfg1");
  EXPECT_EQ(detail->row.label, "");
  EXPECT_EQ(detail->uuid, uuid1);
  EXPECT_FALSE(detail->pid.has_value());
  EXPECT_EQ(detail->sample_count, 3);
  ASSERT_TRUE(detail->row.headline.has_value());
  EXPECT_DOUBLE_EQ(*detail->row.headline, 85);
  // The v1 running run has a heartbeat from 2024: it is shown as interrupted.
  EXPECT_EQ(store.get_run(2)->row.status, "interrupted");
  EXPECT_EQ(store.get_run(2)->row.stored_status, "running");
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_overview"), 2);

  // Constraints of version 2 hold, and the old one on config_hash is gone.
  const std::int64_t again = store.upsert_trial(1, R"({"lr":1})", "cfg1", "cfg1+plugins", "");
  EXPECT_NE(again, 1);
  EXPECT_EQ(store.upsert_trial(1, R"({"lr":1})", "cfg1", "cfg1", ""), 1);
  EXPECT_NE(sqlite3_exec(db, "UPDATE runs SET uuid = 'short' WHERE id = 1", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  // Cascades still point at the rebuilt tables.
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM experiments", nullptr, nullptr, nullptr), SQLITE_OK);
  for (const char* table : {"trials", "runs", "run_plugins", "samples", "summaries", "metrics"})
    EXPECT_EQ(query_int(db, std::string("SELECT count(*) FROM ") + table), 0) << table;
}

TEST_F(StoreTest, Version1RunsGetTheSameUuidWhereverTheyAreMigrated) {
  write_v1_file(db_path_);
  const fs::path copy = dir_ / "copy.db";
  fs::copy_file(db_path_, copy);
  std::string first;
  std::string second;
  {
    Store store = Store::open(db_path_);
    first = query_text(store.handle(), "SELECT group_concat(uuid) FROM runs ORDER BY id");
  }
  {
    Store store = Store::open(copy);
    second = query_text(store.handle(), "SELECT group_concat(uuid) FROM runs ORDER BY id");
  }
  EXPECT_EQ(first, second);
}

TEST_F(StoreTest, OpenReadOnlyReadsAVersion1FileWithoutChangingIt) {
  write_v1_file(db_path_);
  const auto size = fs::file_size(db_path_);
  {
    Store reader = Store::open_read_only(db_path_);
    EXPECT_EQ(reader.schema_version(), runner::store::kSchemaVersion);  // of the migrated copy it reads
    const auto rows = reader.list_runs();
    ASSERT_EQ(rows.size(), 2U);
    EXPECT_EQ(rows[1].status, "finished");
    EXPECT_EQ(reader.get_run(1)->identity, "cfg1");
    EXPECT_THROW_MSG(reader.heartbeat(2), Error,
                     "cannot update the heartbeat of run 2: attempt to write a readonly database");
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), 1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'uuid'"),
            0);
  sqlite3_close(db);
  EXPECT_EQ(fs::file_size(db_path_), size);
}

TEST_F(StoreTest, MigrationStepsAreAvailableForTests) {
  EXPECT_NE(std::string(runner::store::detail::migration_sql(2)).find("runs_v2"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::detail::migration_sql(3)).find("CREATE TABLE peaks"),
            std::string::npos);
  EXPECT_THROW(static_cast<void>(runner::store::detail::migration_sql(4)), std::out_of_range);
  EXPECT_THROW(static_cast<void>(runner::store::detail::migration_sql(0)), std::out_of_range);
}

// --- trial identity ---------------------------------------------------------

TEST_F(StoreTest, TrialIdentityIncludesPluginHashesAndKeepsItsLabel) {
  Store store = Store::open(db_path_);
  const std::int64_t e = store.upsert_experiment("amp", "", "text");
  // Same configuration, rebuilt plugin: another trial.
  const std::int64_t t1 = store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginA", "");
  const std::int64_t t2 = store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginB", "lr=1");
  EXPECT_NE(t1, t2);
  // A trial stored without a label gets the first one written; later ones do not replace it.
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginA", "lr=1"), t1);
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginA", "other"), t1);
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginB", ""), t2);
  sqlite3* db = store.handle();
  EXPECT_EQ(query_text(db, "SELECT label FROM trials WHERE id = " + std::to_string(t1)), "lr=1");
  EXPECT_EQ(query_text(db, "SELECT label FROM trials WHERE id = " + std::to_string(t2)), "lr=1");
  EXPECT_EQ(query_text(db, "SELECT identity FROM trials WHERE id = " + std::to_string(t2)),
            "h1+pluginB");

  EXPECT_EQ(store.find_experiment("amp", "text"), e);
  EXPECT_EQ(store.find_experiment("amp", "other text"), std::nullopt);
  EXPECT_EQ(store.find_trial(e, "h1+pluginB"), t2);
  EXPECT_EQ(store.find_trial(e, "h1"), std::nullopt);
  EXPECT_EQ(store.find_trial(e + 1, "h1+pluginB"), std::nullopt);

  Ids ids;
  ids.trial = t2;
  const std::int64_t run = begin(store, ids);
  const auto detail = store.get_run(run);
  EXPECT_EQ(detail->identity, "h1+pluginB");
  EXPECT_EQ(detail->row.label, "lr=1");
  EXPECT_EQ(detail->experiment_id, e);
  EXPECT_EQ(store.list_runs()[0].label, "lr=1");
  EXPECT_EQ(query_text(db, "SELECT label FROM run_overview"), "lr=1");
}

// --- runs: pid, uuid, signal --------------------------------------------------

TEST_F(StoreTest, BeginRunRecordsPidAndAFreshUuid) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t mine = begin(store, ids);
  RunStart start;
  start.trial_id = ids.trial;
  start.kind = "train";
  start.pid = 4242;
  const std::int64_t other = store.begin_run(start);
  const auto a = store.get_run(mine);
  const auto b = store.get_run(other);
  ASSERT_TRUE(a->pid.has_value());
  EXPECT_EQ(*a->pid, ::getpid());
  EXPECT_EQ(*b->pid, 4242);
  EXPECT_TRUE(is_uuid(a->uuid)) << a->uuid;
  EXPECT_TRUE(is_uuid(b->uuid)) << b->uuid;
  EXPECT_NE(a->uuid, b->uuid);
  EXPECT_TRUE(is_iso_utc_millis(a->heartbeat_at)) << a->heartbeat_at;
  EXPECT_FALSE(a->signal.has_value());
}

TEST_F(StoreTest, FinishRunRecordsTheSignal) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t crashed = begin(store, ids);
  store.finish_run(crashed, "crashed", "killed by signal 11 (SIGSEGV)", {}, {}, 11);
  const auto detail = store.get_run(crashed);
  EXPECT_EQ(detail->row.status, "crashed");
  ASSERT_TRUE(detail->signal.has_value());
  EXPECT_EQ(*detail->signal, 11);
  EXPECT_EQ(query_int(store.handle(), "SELECT signal FROM run_overview WHERE run_id = " +
                                          std::to_string(crashed)),
            11);

  const std::int64_t run = begin(store, ids);
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": invalid signal ";
  const std::string expected =
      "' (expected 0, or a positive signal number for a run that did not finish)";
  EXPECT_THROW_MSG(store.finish_run(run, "finished", "", {}, {}, 9), Error,
                   prefix + "9 for status 'finished" + expected);
  EXPECT_THROW_MSG(store.finish_run(run, "crashed", "", {}, {}, -1), Error,
                   prefix + "-1 for status 'crashed" + expected);
  EXPECT_EQ(store.get_run(run)->row.status, "running");
}

// --- effective status, stale runs, resume -------------------------------------

/// Moves a run's heartbeat `seconds` into the past.
void age_heartbeat(sqlite3* db, std::int64_t run, int seconds) {
  const std::string sql = "UPDATE runs SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-" +
                          std::to_string(seconds) + " seconds') WHERE id = " + std::to_string(run);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
}

TEST_F(StoreTest, StaleRunningRunIsShownAsInterruptedByEveryReader) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t stale = begin(store, ids, "train", 0);
  const std::int64_t alive = begin(store, ids, "train", 1);
  const std::int64_t done = begin(store, ids, "train", 2);
  store.finish_run(done, "finished", "", {summary("step_time", 5)}, {});
  sqlite3* db = store.handle();
  age_heartbeat(db, stale, runner::store::kStaleHeartbeatSeconds + 30);
  age_heartbeat(db, alive, runner::store::kStaleHeartbeatSeconds - 30);
  age_heartbeat(db, done, 3600);  // a final status never changes with age

  const auto id = [](std::int64_t run) { return std::to_string(run); };
  const std::string overview = "FROM run_overview WHERE run_id = ";
  EXPECT_EQ(query_text(db, "SELECT status " + overview + id(stale)), "interrupted");
  EXPECT_EQ(query_text(db, "SELECT stored_status " + overview + id(stale)), "running");
  EXPECT_EQ(query_text(db, "SELECT status " + overview + id(alive)), "running");
  EXPECT_EQ(query_text(db, "SELECT status " + overview + id(done)), "finished");
  EXPECT_EQ(query_text(db, "SELECT status FROM run_summaries WHERE run_id = " + id(done)),
            "finished");
  // The raw table keeps what was written.
  EXPECT_EQ(query_text(db, "SELECT status FROM runs WHERE id = " + id(stale)), "running");

  const auto detail = store.get_run(stale);
  EXPECT_EQ(detail->row.status, "interrupted");
  EXPECT_EQ(detail->row.stored_status, "running");
  EXPECT_EQ(detail->row.finished_at, "");
  EXPECT_EQ(store.get_run(alive)->row.status, "running");
  const auto rows = store.list_runs();
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(rows[2].id, stale);
  EXPECT_EQ(rows[2].status, "interrupted");
  EXPECT_EQ(rows[1].status, "running");

  const auto runs = store.runs_of_trial(ids.trial);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].run_id, stale);
  EXPECT_EQ(runs[0].status, "interrupted");
  EXPECT_EQ(runs[0].stored_status, "running");
  EXPECT_EQ(runs[1].status, "running");
  EXPECT_EQ(runs[2].status, "finished");
  EXPECT_EQ(runs[2].repeat_index, 2);
  EXPECT_TRUE(store.runs_of_trial(ids.trial + 100).empty());

  // The process of the stale run is not dead after all: its verdict still wins.
  store.finish_run(stale, "finished", "", {}, {});
  EXPECT_EQ(store.get_run(stale)->row.status, "finished");
}

TEST_F(StoreTest, MarkStaleRunsInterruptedConvertsOnlyStaleRuns) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t stale = begin(store, ids, "train", 0);
  const std::int64_t alive = begin(store, ids, "train", 1);
  sqlite3* db = store.handle();
  ASSERT_EQ(sqlite3_exec(db,
                         ("UPDATE runs SET heartbeat_at = '2024-05-01T10:00:00.000Z', pid = 77 "
                          "WHERE id = " + std::to_string(stale)).c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_EQ(store.mark_stale_runs_interrupted(), 1);
  const auto detail = store.get_run(stale);
  EXPECT_EQ(detail->row.status, "interrupted");
  EXPECT_EQ(detail->row.stored_status, "interrupted");
  EXPECT_EQ(detail->row.finished_at, "2024-05-01T10:00:00.000Z");
  EXPECT_EQ(detail->error,
            "no heartbeat since 2024-05-01T10:00:00.000Z (pid 77); the runner process stopped "
            "without recording a verdict");
  EXPECT_EQ(store.get_run(alive)->row.stored_status, "running");
  EXPECT_EQ(store.mark_stale_runs_interrupted(), 0);
  // The late process cannot overwrite the verdict any more.
  EXPECT_THROW_MSG(store.finish_run(stale, "finished", "", {}, {}), Error,
                   "cannot finish run " + std::to_string(stale) +
                       ": it already has status 'interrupted'");
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, MarkInterruptedFinishesOnlyARunningRun) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  EXPECT_TRUE(store.mark_interrupted(run, "interrupted by the user (SIGINT)"));
  auto detail = store.get_run(run);
  EXPECT_EQ(detail->row.status, "interrupted");
  EXPECT_EQ(detail->error, "interrupted by the user (SIGINT)");
  EXPECT_TRUE(is_iso_utc_millis(detail->row.finished_at));
  // Second Ctrl-C, or the run finished first: nothing changes.
  EXPECT_FALSE(store.mark_interrupted(run, "again"));
  EXPECT_EQ(store.get_run(run)->error, "interrupted by the user (SIGINT)");
  const std::int64_t finished = begin(store, ids);
  store.finish_run(finished, "finished", "", {}, {});
  EXPECT_FALSE(store.mark_interrupted(finished, "late"));
  EXPECT_EQ(store.get_run(finished)->row.status, "finished");
  EXPECT_THROW_MSG(store.mark_interrupted(999, ""), Error,
                   "cannot mark run 999 interrupted: no such run");
}

// --- merge ------------------------------------------------------------------

/// A shard database as `runner run --shard K/N` writes it: one experiment
/// (the same text in every shard), the given trials, one fingerprint shared
/// by all shards and one of its own, `repeats` finished runs per trial.
struct Shard {
  std::vector<std::string> trials;  // identities; config is derived from them
  std::string own_fingerprint;
  int repeats = 2;
  int steps = 5;
};

void write_shard(const fs::path& path, const Shard& shard) {
  Store store = Store::open(path);
  const std::int64_t e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
  const std::int64_t shared = store.upsert_fingerprint("fp-shared", R"({"host":"a"})");
  const std::int64_t own = store.upsert_fingerprint(shard.own_fingerprint, R"({"host":"b"})");
  for (const auto& identity : shard.trials) {
    const std::int64_t trial =
        store.upsert_trial(e, R"({"t":")" + identity + R"("})", "h-" + identity, identity,
                           "t=" + identity);
    for (int repeat = 0; repeat < shard.repeats; ++repeat) {
      RunStart start;
      start.trial_id = trial;
      start.fingerprint_id = repeat % 2 == 0 ? shared : own;
      start.repeat_index = repeat;
      start.kind = "train";
      start.seed = repeat;
      const std::int64_t run = store.begin_run(start);
      store.add_plugins(run, {{"model", "mlp", "/lib/libmlp.so", "1", "aa"}});
      std::vector<Sample> samples(static_cast<std::size_t>(shard.steps));
      for (int step = 0; step < shard.steps; ++step)
        samples[static_cast<std::size_t>(step)] = {step, step == 0, 100.0 + step, -1, 40, 30, 20,
                                                   1.0 / (step + 1)};
      store.add_samples(run, samples);
      Summary s;
      s.metric = "step_time";
      s.unit = "ns";
      s.n = shard.steps - 1;
      s.p50 = 102;
      store.finish_run(run, "finished", "", {s}, {{"samples_per_s", 10.0 + repeat, "1/s"}});
    }
  }
}

std::int64_t count(const Store& store, const std::string& table) {
  return query_int(store.handle(), "SELECT count(*) FROM " + table);
}

TEST_F(StoreTest, MergeJoinsShardsWithoutDuplicates) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  write_shard(a, {{"t1", "t2"}, "fp-a"});
  write_shard(b, {{"t2", "t3"}, "fp-b"});  // t2 overlaps (e.g. a rerun on another shard)

  Store all = Store::open(db_path_);
  const auto first = all.merge_from(a);
  EXPECT_EQ(first.experiments.added, 1);
  EXPECT_EQ(first.trials.added, 2);
  EXPECT_EQ(first.fingerprints.added, 2);
  EXPECT_EQ(first.runs.added, 4);
  EXPECT_EQ(first.run_plugins.added, 4);
  EXPECT_EQ(first.samples.added, 20);
  EXPECT_EQ(first.summaries.added, 4);
  EXPECT_EQ(first.metrics.added, 4);
  EXPECT_EQ(first.runs.present, 0);

  const auto second = all.merge_from(b);
  EXPECT_EQ(second.experiments.added, 0);
  EXPECT_EQ(second.experiments.present, 1);
  EXPECT_EQ(second.trials.added, 1);
  EXPECT_EQ(second.trials.present, 1);
  EXPECT_EQ(second.fingerprints.added, 1);
  EXPECT_EQ(second.fingerprints.present, 1);
  EXPECT_EQ(second.runs.added, 4);  // runs of t2 in b are other runs than those in a
  EXPECT_EQ(second.samples.added, 20);

  EXPECT_EQ(count(all, "experiments"), 1);
  EXPECT_EQ(count(all, "trials"), 3);
  EXPECT_EQ(count(all, "fingerprints"), 3);
  EXPECT_EQ(count(all, "runs"), 8);
  EXPECT_EQ(count(all, "run_plugins"), 8);
  EXPECT_EQ(count(all, "samples"), 40);
  EXPECT_EQ(count(all, "summaries"), 8);
  EXPECT_EQ(count(all, "metrics"), 8);
  EXPECT_EQ(count(all, "run_overview WHERE status = 'finished'"), 8);
  EXPECT_EQ(count(all, "runs WHERE trial_id = (SELECT id FROM trials WHERE identity = 't2')"), 4);
  sqlite3* db = all.handle();
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");

  // Every run arrived whole: its samples, uuid, timestamps and references.
  for (const fs::path& shard : {a, b}) {
    const Store in = Store::open_read_only(shard);
    for (const auto& row : in.list_runs()) {
      const auto original = in.get_run(row.id);
      const std::string uuid = original->uuid;
      const std::int64_t id = query_int(db, "SELECT id FROM runs WHERE uuid = '" + uuid + "'");
      const auto copy = all.get_run(id);
      ASSERT_TRUE(copy.has_value()) << uuid;
      EXPECT_EQ(copy->row.started_at, original->row.started_at);
      EXPECT_EQ(copy->row.finished_at, original->row.finished_at);
      EXPECT_EQ(copy->identity, original->identity);
      EXPECT_EQ(copy->row.label, original->row.label);
      EXPECT_EQ(copy->config_json, original->config_json);
      EXPECT_EQ(copy->fingerprint_hash, original->fingerprint_hash);
      EXPECT_EQ(copy->pid, original->pid);
      EXPECT_EQ(copy->sample_count, original->sample_count);
      ASSERT_EQ(copy->metrics.size(), 1U);
      EXPECT_DOUBLE_EQ(copy->metrics[0].value, original->metrics[0].value);
      const auto samples_in = in.samples(row.id);
      const auto samples_out = all.samples(id);
      ASSERT_EQ(samples_out.size(), samples_in.size());
      for (std::size_t i = 0; i < samples_in.size(); ++i) {
        EXPECT_EQ(samples_out[i].warmup, samples_in[i].warmup);
        EXPECT_DOUBLE_EQ(samples_out[i].wall_ns, samples_in[i].wall_ns);
        EXPECT_DOUBLE_EQ(samples_out[i].data_ns, -1);  // NULL stays NULL
        EXPECT_DOUBLE_EQ(samples_out[i].loss, samples_in[i].loss);
      }
    }
  }
}

TEST_F(StoreTest, MergingTheSameShardTwiceAddsNothing) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1", "t2"}, "fp-a"});
  Store all = Store::open(db_path_);
  all.merge_from(a);
  const auto again = all.merge_from(std::vector<fs::path>{a, a});
  ASSERT_EQ(again.size(), 2U);
  for (const auto& counts : again) {
    for (const auto* table : {&counts.experiments, &counts.trials, &counts.fingerprints,
                              &counts.runs, &counts.run_plugins, &counts.samples,
                              &counts.summaries, &counts.metrics})
      EXPECT_EQ(table->added, 0);
    EXPECT_EQ(counts.experiments.present, 1);
    EXPECT_EQ(counts.trials.present, 2);
    EXPECT_EQ(counts.fingerprints.present, 2);
    EXPECT_EQ(counts.runs.present, 4);
    EXPECT_EQ(counts.samples.present, 20);
    EXPECT_EQ(counts.metrics.present, 4);
  }
  EXPECT_EQ(count(all, "runs"), 4);
  EXPECT_EQ(count(all, "samples"), 20);
  // Merging the merged file back into a shard adds only what the shard lacks.
  all = Store::open(db_path_);
  {
    Store shard = Store::open(a);
    const auto back = shard.merge_from(db_path_);
    EXPECT_EQ(back.runs.added, 0);
    EXPECT_EQ(back.runs.present, 4);
  }
  EXPECT_EQ(query_text(all.handle(), "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, MergeTotalsAddUp) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  write_shard(a, {{"t1"}, "fp-a"});
  write_shard(b, {{"t1", "t2"}, "fp-b"});
  Store all = Store::open(db_path_);
  runner::store::MergeCounts total;
  for (const auto& counts : all.merge_from(std::vector<fs::path>{a, b})) total += counts;
  EXPECT_EQ(total.experiments.added, 1);
  EXPECT_EQ(total.experiments.present, 1);
  EXPECT_EQ(total.trials.added, 2);
  EXPECT_EQ(total.trials.present, 1);
  EXPECT_EQ(total.runs.added, 6);
  EXPECT_EQ(total.samples.added, 30);
  EXPECT_EQ(total.runs_running, 0);
}

TEST_F(StoreTest, MergeIntoItselfIsRejected) {
  write_shard(db_path_, {{"t1"}, "fp-a"});
  Store store = Store::open(db_path_);
  const fs::path other_spelling = dir_ / "." / "runner.db";
  EXPECT_THROW_MSG(store.merge_from(other_spelling), Error,
                   "cannot merge database '" + other_spelling.string() + "' into itself");
  const fs::path link = dir_ / "link.db";
  fs::create_symlink(db_path_, link);
  EXPECT_THROW_MSG(store.merge_from(link), Error,
                   "cannot merge database '" + link.string() + "' into itself");
  EXPECT_EQ(count(store, "runs"), 2);
}

TEST_F(StoreTest, MergeWithABadInputWritesNothing) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1"}, "fp-a"});
  const fs::path missing = dir_ / "missing.db";
  const fs::path newer = dir_ / "newer.db";
  exec_raw(newer, "CREATE TABLE x (y); PRAGMA user_version = 9;");
  const fs::path foreign = dir_ / "foreign.db";
  exec_raw(foreign, "CREATE TABLE x (y);");
  Store all = Store::open(db_path_);
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, missing}), Error,
                   "database '" + missing.string() + "' does not exist");
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, newer}), Error,
                   "database '" + newer.string() +
                       "' has schema version 9, newer than this runner supports (3)");
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, foreign}), Error,
                   "'" + foreign.string() +
                       "' is not a runner database: it has tables but no runner schema version");
  try {
    all.merge_from(missing);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
  }
  EXPECT_EQ(count(all, "experiments"), 0);
  EXPECT_EQ(count(all, "runs"), 0);
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(StoreTest, MergeOfConflictingIdentitiesRollsBackEverything) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  write_shard(a, {{"t1"}, "fp-a"});
  {
    Store store = Store::open(b);
    const std::int64_t e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
    store.upsert_trial(e, R"({"t":"different"})", "h-t1", "t1", "");
  }
  Store all = Store::open(db_path_);
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, b}), Error,
                   "cannot merge database '" + b.string() +
                       "': trial t1 of experiment 'sweep' is already stored with a different "
                       "configuration");
  EXPECT_EQ(count(all, "experiments"), 0);  // a's part is rolled back too
  EXPECT_EQ(count(all, "runs"), 0);

  const fs::path c = dir_ / "c.db";
  {
    Store store = Store::open(c);
    store.upsert_fingerprint("fp-shared", R"({"host":"elsewhere"})");
  }
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, c}), Error,
                   "cannot merge database '" + c.string() +
                       "': fingerprint fp-shared is already stored with different contents");
  EXPECT_EQ(count(all, "fingerprints"), 0);
  // The store is still usable.
  EXPECT_EQ(all.merge_from(a).runs.added, 2);
}

TEST_F(StoreTest, MergeCopiesStaleRunsAsInterruptedAndSkipsLiveOnes) {
  const fs::path a = dir_ / "a.db";
  std::int64_t stale = 0;
  std::int64_t live = 0;
  {
    Store shard = Store::open(a);
    const Ids ids = add_trial(shard);
    stale = begin(shard, ids, "train", 0);
    live = begin(shard, ids, "train", 1);
    shard.add_samples(stale, {Sample{}});
    shard.add_samples(live, {Sample{}});
    ASSERT_EQ(sqlite3_exec(shard.handle(),
                           ("UPDATE runs SET heartbeat_at = '2024-05-01T10:00:00.000Z', pid = 5 "
                            "WHERE id = " + std::to_string(stale)).c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  Store all = Store::open(db_path_);
  const auto counts = all.merge_from(a);
  EXPECT_EQ(counts.runs.added, 1);
  EXPECT_EQ(counts.runs_running, 1);
  EXPECT_EQ(counts.samples.added, 1);
  EXPECT_EQ(counts.samples.present, 0);
  const auto rows = all.list_runs();
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].stored_status, "interrupted");
  EXPECT_EQ(rows[0].finished_at, "2024-05-01T10:00:00.000Z");
  EXPECT_EQ(all.get_run(rows[0].id)->error,
            "no heartbeat since 2024-05-01T10:00:00.000Z (pid 5); the runner process stopped "
            "without recording a verdict");
  // The shard itself is untouched (read-only input).
  const Store shard = Store::open_read_only(a);
  EXPECT_EQ(shard.get_run(stale)->row.stored_status, "running");
  // Once the live run has finished, the next merge brings it.
  {
    Store writer = Store::open(a);
    writer.finish_run(live, "finished", "", {}, {});
  }
  const auto later = all.merge_from(a);
  EXPECT_EQ(later.runs.added, 1);
  EXPECT_EQ(later.runs.present, 1);
  EXPECT_EQ(later.runs_running, 0);
  EXPECT_EQ(count(all, "runs"), 2);
}

TEST_F(StoreTest, MergeReadsAVersion1ShardAndDoesNotDuplicateItLater) {
  const fs::path old = dir_ / "old.db";
  write_v1_file(old);
  Store all = Store::open(db_path_);
  const auto first = all.merge_from(old);
  EXPECT_EQ(first.experiments.added, 1);
  EXPECT_EQ(first.trials.added, 2);
  EXPECT_EQ(first.runs.added, 2);  // the v1 running run is stale: copied as interrupted
  EXPECT_EQ(first.samples.added, 3);
  EXPECT_EQ(query_text(all.handle(), "SELECT identity FROM trials ORDER BY id LIMIT 1"), "cfg1");
  // The input file stays at version 1.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(old.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    EXPECT_EQ(query_int(db, "PRAGMA user_version"), 1);
    sqlite3_close(db);
  }
  EXPECT_EQ(all.merge_from(old).runs.added, 0);
  // Migrated in place by a newer runner, it is still the same runs.
  { Store upgraded = Store::open(old); }
  const auto after_upgrade = all.merge_from(old);
  EXPECT_EQ(after_upgrade.runs.added, 0);
  EXPECT_EQ(after_upgrade.runs.present, 2);  // the stale "running" one matches its copy too
  EXPECT_EQ(after_upgrade.runs_running, 0);
  EXPECT_EQ(count(all, "runs"), 2);
}

TEST_F(StoreTest, MergeFillsAMissingLabel) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1"}, "fp-a"});
  Store all = Store::open(db_path_);
  const std::int64_t e = all.upsert_experiment("sweep", "", "[experiment]\n");
  const std::int64_t t = all.upsert_trial(e, R"({"t":"t1"})", "h-t1", "t1", "");
  const auto counts = all.merge_from(a);
  EXPECT_EQ(counts.trials.present, 1);
  EXPECT_EQ(query_text(all.handle(), "SELECT label FROM trials WHERE id = " + std::to_string(t)),
            "t=t1");
}

TEST_F(StoreTest, MergeOfManySamplesIsQuick) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1", "t2"}, "fp-a", 5, 10000});  // 10 runs x 10,000 steps
  Store all = Store::open(db_path_);
  const auto start = std::chrono::steady_clock::now();
  const auto counts = all.merge_from(a);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(counts.samples.added, 100000);
  EXPECT_EQ(count(all, "samples"), 100000);
  RecordProperty("merge_seconds_100k_samples", std::to_string(seconds));
  std::cout << "merged 100,000 samples in " << seconds << " s\n";
  EXPECT_EQ(query_text(all.handle(), "PRAGMA integrity_check"), "ok");
}

}  // namespace

// --- schema version 3: measurement columns and measured peaks ---------------

TEST_F(StoreTest, Version3PhasesStatisticsAndPeaksRoundTrip) {
  Store store = Store::open(db_path_);
  const auto experiment = store.upsert_experiment("e", "/e.toml", "text");
  const auto trial = store.upsert_trial(experiment, "{}", "h", "h", "");
  const auto fingerprint = store.upsert_fingerprint("fp", "{}");
  RunStart start;
  start.trial_id = trial;
  start.fingerprint_id = fingerprint;
  start.kind = "train";
  const auto run = store.begin_run(start);
  Sample with_phases;
  with_phases.step = 0;
  with_phases.wall_ns = 100;
  with_phases.h2d_ns = 7;
  with_phases.comm_ns = 11;
  Sample without;
  without.step = 1;
  without.wall_ns = 90;
  store.add_samples(run, {with_phases, without});
  Summary summary;
  summary.metric = "step_time";
  summary.unit = "ns";
  summary.n = 2;
  summary.p5 = 1;
  summary.p95 = 2;
  summary.cv = 0.25;
  store.finish_run(run, "finished", "", {summary}, {});

  const auto samples = store.samples(run);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_DOUBLE_EQ(samples[0].h2d_ns, 7);
  EXPECT_DOUBLE_EQ(samples[0].comm_ns, 11);
  EXPECT_DOUBLE_EQ(samples[1].h2d_ns, -1);  // NULL on disk
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM samples WHERE comm_ns IS NULL"), 1);
  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  ASSERT_EQ(detail->summaries.size(), 1u);
  EXPECT_DOUBLE_EQ(detail->summaries[0].p5, 1);
  EXPECT_DOUBLE_EQ(detail->summaries[0].p95, 2);
  EXPECT_DOUBLE_EQ(detail->summaries[0].cv, 0.25);
  EXPECT_DOUBLE_EQ(query_real(store.handle(), "SELECT cv FROM run_summaries"), 0.25);

  EXPECT_FALSE(store.peak_flop_per_s(fingerprint, "cpu", "float32").has_value());
  store.set_peak_flop_per_s(fingerprint, "cpu", "float32", 1.5e11, "matmul");
  store.set_peak_flop_per_s(fingerprint, "cpu", "float32", 2.5e11, "matmul");  // replaced
  EXPECT_DOUBLE_EQ(*store.peak_flop_per_s(fingerprint, "cpu", "float32"), 2.5e11);
  EXPECT_FALSE(store.peak_flop_per_s(fingerprint, "cuda", "float32").has_value());
}
