// Telling runner's databases from other applications' SQLite files before
// anything is written (store/src/identify.cpp, issue 30 item 2).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <string>

#include "runner/common/error.hpp"
#include "store_fixture.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/foreign_sqlite.hpp"

namespace {

using namespace store_test;
using runner::Error;

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Stands in for runner's SQL function so that the migration steps prepare;
/// on empty tables it is never called.
void no_sha256(sqlite3_context* context, int /*argc*/, sqlite3_value** /*argv*/) {
  sqlite3_result_null(context);
}

/// A genuine, empty runner database at `version`, made by runner's own
/// migration steps, plus `extra` SQL.
void write_runner_file(const fs::path& path, int version, const std::string& extra = "") {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_create_function(db, "runner_sha256", 1, SQLITE_UTF8, nullptr, &no_sha256,
                                    nullptr, nullptr),
            SQLITE_OK);
  std::string sql = "BEGIN;";
  for (int step = 1; step <= version; ++step)
    sql += std::string(runner::store::testing::migration_sql(step));
  sql += "PRAGMA user_version = " + std::to_string(version) + ";" + extra + "COMMIT;";
  char* message = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
      << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

void expect_refused_untouched(const fs::path& path, const std::string& message,
                              const std::string& what) {
  const std::string before = bytes_of(path);
  ASSERT_EQ(before.substr(18, 2), std::string("\x01\x01", 2)) << what;
  EXPECT_THROW_MSG(Store::open(path), Error, message);
  EXPECT_THROW_MSG(Store::open_read_only(path), Error, message);
  EXPECT_THROW_MSG(static_cast<void>(Store::open_read_only_if_recorded(path)), Error, message);
  EXPECT_EQ(bytes_of(path), before) << what;
  EXPECT_FALSE(fs::exists(path.string() + "-wal")) << what;
  EXPECT_FALSE(fs::exists(path.string() + "-shm")) << what;
  EXPECT_FALSE(fs::exists(path.string() + "-journal")) << what;
}

TEST_F(StoreTest, AForeignExperimentsTableIsRefusedAtEveryVersionAndLeftByteForByte) {
  for (const long long version : runner::test::foreign_user_versions()) {
    runner::test::write_foreign_sqlite(db_path_, version);
    expect_refused_untouched(db_path_, runner::test::foreign_refusal(db_path_, version),
                             "user_version " + std::to_string(version));
    try {
      Store::open(db_path_);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), runner::ErrorKind::input) << version;
      if (version <= runner::store::kSchemaVersion) {
        EXPECT_EQ(e.hint(), "choose another file with --db PATH or RUNNER_DB");
      }
    }
  }
}

TEST_F(StoreTest, ARunnerSchemaWithAnAlteredOrExtraTableIsRefused) {
  const std::string path = db_path_.string();
  write_runner_file(db_path_, 2, "ALTER TABLE experiments ADD COLUMN owner TEXT;");
  expect_refused_untouched(
      db_path_,
      "'" + path + "' is not a runner database: it claims runner schema version 2, but table "
                   "'experiments' has columns (id, name, source_path, source_text, "
                   "source_sha256, created_at, owner), not runner's (id, name, source_path, "
                   "source_text, source_sha256, created_at)",
      "altered");
  fs::remove(db_path_);
  write_runner_file(db_path_, 2, "CREATE TABLE notes (text TEXT);");
  expect_refused_untouched(db_path_,
                           "'" + path + "' is not a runner database: it claims runner schema "
                                        "version 2, but it has a table 'notes' that runner's "
                                        "schema does not",
                           "extra");
  fs::remove(db_path_);
  write_runner_file(db_path_, 3, "DROP VIEW run_summaries; DROP TABLE peaks;");
  expect_refused_untouched(db_path_,
                           "'" + path + "' is not a runner database: it claims runner schema "
                                        "version 3, but it has no table 'peaks'",
                           "missing");
}

TEST_F(StoreTest, AGenuineStoreOfEveryVersionIsRecognisedAndMigrated) {
  for (int version = 1; version <= runner::store::kSchemaVersion; ++version) {
    fs::remove(db_path_);
    fs::remove(db_path_.string() + "-wal");
    fs::remove(db_path_.string() + "-shm");
    write_runner_file(db_path_, version);
    const std::string before = bytes_of(db_path_);
    {
      const Store reader = Store::open_read_only(db_path_);
      EXPECT_EQ(reader.schema_version(), runner::store::kSchemaVersion) << version;
    }
    EXPECT_EQ(bytes_of(db_path_), before) << version;
    const Store store = Store::open(db_path_);
    EXPECT_EQ(store.schema_version(), runner::store::kSchemaVersion) << version;
    EXPECT_EQ(query_text(handle(store), "PRAGMA journal_mode"), "wal") << version;
  }
}

}  // namespace
