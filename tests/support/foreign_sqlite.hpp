// Another application's SQLite file that happens to have a table named
// `experiments`, at any user_version, and what runner says when it refuses
// it: shared by the store's and the CLI's byte-for-byte tests (issue 30
// item 2).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include "runner/store/store.hpp"

namespace runner::test {

/// The user_versions a foreign file is tried at: negative, none, the first
/// two, the ones around runner's own, one past it and the largest.
inline std::vector<long long> foreign_user_versions() {
  const long long current = runner::store::kSchemaVersion;
  return {-1, 0, 1, 2, current - 1, current, current + 1, INT_MAX};
}

/// Writes, in rollback-journal mode (header bytes 18-19 are 1, 1), a file
/// whose only table is a foreign `experiments` with one row.
inline void write_foreign_sqlite(const std::filesystem::path& path, long long user_version) {
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql =
      "CREATE TABLE experiments (id INTEGER PRIMARY KEY, title TEXT);"
      "INSERT INTO experiments VALUES (1, 'keep me');"
      "PRAGMA user_version = " + std::to_string(user_version) + ";";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

/// The first line of runner's refusal of that file (without "error: ").
inline std::string foreign_refusal(const std::filesystem::path& path, long long user_version) {
  const std::string quoted = "'" + path.string() + "'";
  const std::string version = std::to_string(user_version);
  if (user_version > runner::store::kSchemaVersion)
    return "database " + quoted + " has schema version " + version +
           ", newer than this runner supports (" +
           std::to_string(runner::store::kSchemaVersion) + ")";
  if (user_version < 0) return quoted + " is not a runner database: its schema version is " + version;
  if (user_version == 0)
    return quoted + " is not a runner database: it has tables but no runner schema version";
  return quoted + " is not a runner database: it claims runner schema version " + version +
         ", but table 'experiments' has columns (id, title), not runner's (id, name, "
         "source_path, source_text, source_sha256, created_at)";
}

}  // namespace runner::test
