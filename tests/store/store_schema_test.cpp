// The store: opening, checking what a file is, migrations (store/src/schema.cpp,
// migrations.cpp) and the schema itself.
#include "store_fixture.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using namespace store_test;
using runner::Error;
using runner::ErrorKind;

constexpr const char* kWritableHint = "choose a writable path with --db PATH or RUNNER_DB";

// --- opening and migration ------------------------------------------------

TEST_F(StoreTest, FreshFileIsMigratedInWalModeWithForeignKeys) {
  Store store = Store::open(db_path_);
  sqlite3* db = handle(store);
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
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(store.upsert_experiment("amp", "amp.toml", "text"), experiment);
}

TEST_F(StoreTest, NewerSchemaVersionIsRejected) {
  const std::string future = std::to_string(runner::store::kSchemaVersion + 1);
  exec_raw(db_path_, "CREATE TABLE future (x); PRAGMA user_version = " + future + ";");
  const std::string expected = "database '" + db_path_.string() +
                               "' has schema version " + future + ", newer than this runner supports (" + std::to_string(runner::store::kSchemaVersion) + ")";
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
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), runner::store::kSchemaVersion + 1);
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

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(StoreTest, ARefusedFileIsNotModifiedByteForByte) {
  // Another application's database in rollback-journal mode (header bytes
  // 18-19 are 1, 1; WAL would make them 2, 2), one with a negative schema
  // version, and one from a newer runner.
  const std::string path = db_path_.string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('keep me');",
       "'" + path + "' is not a runner database: it has tables but no runner schema version"},
      {"CREATE TABLE notes (text TEXT); PRAGMA user_version = -1;",
       "'" + path + "' is not a runner database: its schema version is -1"},
      {"CREATE TABLE notes (text TEXT); PRAGMA user_version = 99;",
       "database '" + path + "' has schema version 99, newer than this runner supports (" + std::to_string(runner::store::kSchemaVersion) + ")"},
  };
  for (const auto& [sql, message] : cases) {
    fs::remove(db_path_);
    exec_raw(db_path_, sql);
    const std::string before = bytes_of(db_path_);
    ASSERT_EQ(before.substr(18, 2), std::string("\x01\x01", 2));
    EXPECT_THROW_MSG(Store::open(db_path_), Error, message);
    EXPECT_THROW_MSG(Store::open_read_only(db_path_), Error, message);
    EXPECT_EQ(bytes_of(db_path_), before) << sql;
    EXPECT_FALSE(fs::exists(db_path_.string() + "-wal")) << sql;
  }
}

TEST_F(StoreTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  ASSERT_EQ(::mkfifo(db_path_.c_str(), 0600), 0);
  EXPECT_THROW_MSG(Store::open_read_only(db_path_), Error,
                   "'" + db_path_.string() + "' is not a runner database: it is not a regular file");
  EXPECT_THROW_MSG(Store::open(db_path_), Error,
                   "cannot write database '" + db_path_.string() + "': not a regular file");
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
  sqlite3* connection = handle(a);
  Store b(std::move(a));
  EXPECT_EQ(handle(b), connection);
  EXPECT_EQ(handle(a), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  Store c = Store::open(dir_ / "other.db");
  c = std::move(b);
  EXPECT_EQ(handle(c), connection);
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

// --- schema version 2: migration from version 1 ----------------------------

TEST_F(StoreTest, MigratesAVersion1FileKeepingItsData) {
  write_v1_file(db_path_);
  Store store = Store::open(db_path_);
  sqlite3* db = handle(store);
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
  EXPECT_EQ(detail->row.status, RunStatus::finished);
  EXPECT_EQ(detail->identity, "cfg1");
  EXPECT_EQ(detail->row.label, "");
  EXPECT_EQ(detail->uuid, uuid1);
  EXPECT_FALSE(detail->pid.has_value());
  EXPECT_EQ(detail->sample_count, 3);
  ASSERT_TRUE(detail->row.headline.has_value());
  EXPECT_DOUBLE_EQ(*detail->row.headline, 85);
  // The v1 running run has a heartbeat from 2024: it is shown as interrupted.
  EXPECT_EQ(store.get_run(2)->row.status, RunStatus::interrupted);
  EXPECT_EQ(store.get_run(2)->row.stored_status, RunStatus::running);
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
    first = query_text(handle(store), "SELECT group_concat(uuid) FROM runs ORDER BY id");
  }
  {
    Store store = Store::open(copy);
    second = query_text(handle(store), "SELECT group_concat(uuid) FROM runs ORDER BY id");
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
    EXPECT_EQ(rows[1].status, RunStatus::finished);
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
  EXPECT_NE(std::string(runner::store::testing::migration_sql(2)).find("runs_v2"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(3)).find("CREATE TABLE peaks"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(4)).find("runs_live_claim"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(5)).find("CREATE TABLE evaluations"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(6)).find("ADD COLUMN grad_norm"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(7)).find("CREATE TABLE run_attributes"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(8)).find("ADD COLUMN environment"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(9)).find("ADD COLUMN rank_max_ns"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(10)).find("CREATE TABLE peak_bandwidth"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(11)).find("CREATE TABLE run_ops"),
            std::string::npos);
  EXPECT_NE(std::string(runner::store::testing::migration_sql(12)).find("CREATE TABLE run_labels"),
            std::string::npos);
  EXPECT_THROW(static_cast<void>(runner::store::testing::migration_sql(13)), std::out_of_range);
  EXPECT_THROW(static_cast<void>(runner::store::testing::migration_sql(0)), std::out_of_range);
}

// --- schema version 11: profiled samples and the operators of a profiled run -

TEST_F(StoreTest, Version11OldSamplesReadAsNotProfiledAndRunOpsRoundTrip) {
  write_v1_file(db_path_);
  Store store = Store::open(db_path_);
  sqlite3* db = handle(store);
  // Rows written before version 11 have NULL: not profiled.
  EXPECT_EQ(query_text(db, "SELECT count(*) FROM samples WHERE profiled IS NULL"), "3");
  for (const Sample& s : store.samples(1)) EXPECT_FALSE(s.profiled) << s.step;
  EXPECT_TRUE(store.run_ops(1).empty());

  const auto experiment = store.upsert_experiment("e", "/e.toml", "text");
  const auto trial = store.upsert_trial(experiment, "{}", "h11", "h11", "");
  RunStart start;
  start.trial_id = trial;
  const auto run = store.begin_run(start);
  std::vector<Sample> samples(4);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    samples[i].step = static_cast<std::int64_t>(i);
    samples[i].wall_ns = 100;
    samples[i].warmup = i == 0;
    samples[i].profiled = i == 1 || i == 2;
  }
  store.add_samples(run, samples);
  const std::vector<runner::store::OpStat> ops = {
      {"aten::mm", "", 6, 600, 700, 0, 0},
      {"aten::addmm", "[[2, 3], [3, 4]]", 3, 900, 1000, 10, 20},
      {"aten::addmm", "[[5, 3], [3, 4]]", 1, 50, 50, 0, 0}};
  store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, {}, {}, ops);
  EXPECT_EQ(query_text(db, "SELECT group_concat(profiled, '') FROM (SELECT profiled FROM samples "
                           "WHERE run_id = " + std::to_string(run) + " ORDER BY step)"),
            "0110");
  const auto read = store.samples(run);
  ASSERT_EQ(read.size(), 4U);
  EXPECT_EQ(read[1].profiled, true);
  EXPECT_EQ(read[3].profiled, false);
  EXPECT_FALSE(read[1].measured());
  EXPECT_TRUE(read[3].measured());
  const auto back = store.run_ops(run);
  ASSERT_EQ(back.size(), 3U);  // by self CPU time, descending
  EXPECT_EQ(back[0].name, "aten::addmm");
  EXPECT_EQ(back[0].input_shapes, "[[2, 3], [3, 4]]");
  EXPECT_EQ(back[0].calls, 3);
  EXPECT_EQ(back[0].self_cpu_ns, 900);
  EXPECT_EQ(back[0].total_cpu_ns, 1000);
  EXPECT_EQ(back[0].self_cuda_ns, 10);
  EXPECT_EQ(back[0].total_cuda_ns, 20);
  EXPECT_EQ(back[1].name, "aten::mm");
  EXPECT_EQ(back[2].input_shapes, "[[5, 3], [3, 4]]");
  // Deleting the run takes its operators with it.
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM runs", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_ops"), 0);
}

TEST_F(StoreTest, FinishRunRefusesBadOperatorsAndWritesNothing) {
  Store store = Store::open(db_path_);
  const auto experiment = store.upsert_experiment("e", "/e.toml", "text");
  const auto trial = store.upsert_trial(experiment, "{}", "h", "h", "");
  RunStart start;
  start.trial_id = trial;
  const auto run = store.begin_run(start);
  const std::string doing = "cannot finish run " + std::to_string(run);
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, {}, {},
                                    {{"aten::mm", "", 1, 5, 5, 0, 0}, {"aten::mm", "", 2, 1, 1, 0, 0}}),
                   Error, doing + ": operator 'aten::mm' is given twice with input shapes ''");
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, {}, {},
                                    {{"aten::mm", "", 1, 6, 5, 0, 0}}),
                   Error,
                   doing + ": operator 'aten::mm': expected calls >= 1 and 0 <= self <= total times");
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, {}, {},
                                    {{"", "", 1, 1, 1, 0, 0}}),
                   Error, doing + ": an operator has an empty name");
  EXPECT_EQ(store.get_run(run)->row.status, RunStatus::running);
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM run_ops"), 0);
}

// --- schema version 3: measurement columns and measured peaks ---------------

TEST_F(StoreTest, Version3PhasesStatisticsAndPeaksRoundTrip) {
  Store store = Store::open(db_path_);
  const auto experiment = store.upsert_experiment("e", "/e.toml", "text");
  const auto trial = store.upsert_trial(experiment, "{}", "h", "h", "");
  const auto fingerprint = store.upsert_fingerprint("fp", "{}");
  RunStart start;
  start.trial_id = trial;
  start.fingerprint_id = fingerprint;
  start.kind = RunKind::train;
  const auto run = store.begin_run(start);
  Sample with_phases;
  with_phases.step = 0;
  with_phases.wall_ns = 100;
  with_phases.phase(Phase::h2d) = 7;
  with_phases.phase(Phase::comm) = 11;
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
  store.finish_run(run, RunStatus::finished, "", {summary}, {});

  const auto samples = store.samples(run);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_DOUBLE_EQ(samples[0].phase(Phase::h2d), 7);
  EXPECT_DOUBLE_EQ(samples[0].phase(Phase::comm), 11);
  EXPECT_DOUBLE_EQ(samples[1].phase(Phase::h2d), -1);  // NULL on disk
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM samples WHERE comm_ns IS NULL"), 1);
  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  ASSERT_EQ(detail->summaries.size(), 1u);
  EXPECT_DOUBLE_EQ(detail->summaries[0].p5, 1);
  EXPECT_DOUBLE_EQ(detail->summaries[0].p95, 2);
  EXPECT_DOUBLE_EQ(detail->summaries[0].cv, 0.25);
  EXPECT_DOUBLE_EQ(query_real(handle(store), "SELECT cv FROM run_summaries"), 0.25);

  EXPECT_FALSE(store.peak_flop_per_s(fingerprint, "cpu", "float32").has_value());
  store.set_peak_flop_per_s(fingerprint, "cpu", "float32", 1.5e11, "matmul");
  store.set_peak_flop_per_s(fingerprint, "cpu", "float32", 2.5e11, "matmul");  // replaced
  EXPECT_DOUBLE_EQ(*store.peak_flop_per_s(fingerprint, "cpu", "float32"), 2.5e11);
  EXPECT_FALSE(store.peak_flop_per_s(fingerprint, "cuda", "float32").has_value());

  // The copy bandwidth (version 10), per device, replaced the same way.
  EXPECT_FALSE(store.peak_bytes_per_s(fingerprint, "cpu").has_value());
  store.set_peak_bytes_per_s(fingerprint, "cpu", 2e10, "copy");
  store.set_peak_bytes_per_s(fingerprint, "cpu", 3e10, "copy");
  EXPECT_DOUBLE_EQ(*store.peak_bytes_per_s(fingerprint, "cpu"), 3e10);
  EXPECT_FALSE(store.peak_bytes_per_s(fingerprint, "cuda").has_value());
  EXPECT_EQ(query_text(handle(store), "SELECT method FROM peak_bandwidth"), "copy");
  EXPECT_THROW(store.set_peak_bytes_per_s(fingerprint, "cuda", 0.0, "copy"), runner::Error);
}

// --- the phase table ---------------------------------------------------------

/// The REAL columns of the samples table, by name, in a file opened by `store`.
std::string sample_column_type(const Store& store, const std::string& column) {
  return query_text(handle(store),
                    "SELECT type FROM pragma_table_info('samples') WHERE name = '" + column + "'");
}

TEST_F(StoreTest, EveryPhaseHasItsColumnInTheSchema) {
  // The columns the store writes, reads and merges come from kPhases; each
  // must exist in a new file and in a file migrated from version 1.
  const fs::path old = dir_ / "v1.db";
  write_v1_file(old);
  for (const fs::path& path : {db_path_, old}) {
    const Store store = Store::open(path);
    for (const auto& phase : runner::store::kPhases)
      EXPECT_EQ(sample_column_type(store, phase.column), "REAL") << phase.name << " in " << path;
    // And nothing else: run_id, step, warmup, wall_ns and loss, the phases,
    // the four recipe columns (lr, grad_norm, loss_scale, skipped), the two
    // rank columns (rank_max_ns, rank_median_ns) and profiled, so a phase
    // column added by a migration without its table line shows up here too.
    EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM pragma_table_info('samples')"),
              5 + static_cast<std::int64_t>(runner::store::kPhaseCount) + 4 + 2 + 1)
        << path;
  }
  // Names and columns are unique, and each column is the name plus "_ns" (the
  // convention docs/store.md states for durations).
  for (std::size_t i = 0; i < runner::store::kPhaseCount; ++i) {
    const auto& phase = runner::store::kPhases[i];
    EXPECT_EQ(std::string(phase.column), std::string(phase.name) + "_ns");
    EXPECT_EQ(runner::store::phase_index(phase.phase), i);
    for (std::size_t j = 0; j < i; ++j)
      EXPECT_STRNE(phase.name, runner::store::kPhases[j].name);
  }
}

}  // namespace
