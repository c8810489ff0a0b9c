#include "runner/store/store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "runner/core/common/error.hpp"
#include "runner/core/common/sha256.hpp"
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
    ids.trial = store.upsert_trial(ids.experiment, R"({"lr":0.1})" + config_hash, config_hash);
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
  EXPECT_EQ(store.schema_version(), 1);
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
  EXPECT_EQ(store.schema_version(), 1);
  EXPECT_EQ(query_int(store.handle(), "SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(store.upsert_experiment("amp", "amp.toml", "text"), experiment);
}

TEST_F(StoreTest, NewerSchemaVersionIsRejected) {
  exec_raw(db_path_, "CREATE TABLE future (x); PRAGMA user_version = 7;");
  const std::string expected = "database '" + db_path_.string() +
                               "' has schema version 7, newer than this runner supports (1)";
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
  EXPECT_EQ(store.schema_version(), 1);
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
  EXPECT_EQ(reader.schema_version(), 1);
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
  EXPECT_EQ(c.schema_version(), 1);
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

  const std::int64_t t1 = store.upsert_trial(e1, R"({"lr":1})", "h1");
  EXPECT_EQ(store.upsert_trial(e1, R"({"lr":1})", "h1"), t1);
  EXPECT_NE(store.upsert_trial(e1, R"({"lr":2})", "h2"), t1);
  EXPECT_NE(store.upsert_trial(e2, R"({"lr":1})", "h1"), t1);

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
  store.upsert_trial(e, R"({"lr":1})", "h1");
  EXPECT_THROW_MSG(store.upsert_trial(e, R"({"lr":2})", "h1"), Error,
                   "trial h1 is already stored with a different configuration");
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

}  // namespace
