// Telling a runner database from another application's SQLite file, through
// a read-only connection, before anything writes to it. user_version alone
// proves nothing (any program may set it), so a file that claims runner's
// schema version N must also have exactly the tables, with exactly the
// columns, that runner's migration steps 1..N create. The expected layout of
// each version is not written down twice: it is built by running those same
// steps on an in-memory database, so a new migration step is recognised
// without editing this file.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "schema.hpp"

namespace runner::store::detail {
namespace {

/// Table name -> its column names in declaration order.
using Layout = std::map<std::string, std::vector<std::string>>;

std::vector<std::string> table_names(sqlite3* db) {
  std::vector<std::string> names;
  Statement stmt(db,
                 "SELECT name FROM sqlite_schema WHERE type = 'table' "
                 "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name");
  while (stmt.step()) names.push_back(stmt.text(0));
  return names;
}

std::vector<std::string> column_names(sqlite3* db, const std::string& table) {
  std::vector<std::string> names;
  Statement stmt(db, "SELECT name FROM pragma_table_info(?1) ORDER BY cid");
  stmt.bind_text(1, table);
  while (stmt.step()) names.push_back(stmt.text(0));
  return names;
}

Layout layout_of(sqlite3* db) {
  Layout layout;
  for (const std::string& table : table_names(db)) layout[table] = column_names(db, table);
  return layout;
}

/// The tables of a genuine runner database at `version` (1..kSchemaVersion),
/// built once per process and version.
const Layout& expected_layout(int version) {
  static std::mutex mutex;
  static std::map<int, Layout> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto found = cache.find(version); found != cache.end()) return found->second;
  const Connection db = open_connection(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  for (int step = 1; step <= version; ++step) exec(db.get(), migration_step(step));
  return cache.emplace(version, layout_of(db.get())).first->second;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return "(" + out + ")";
}

/// Why the file behind `db` is not runner's schema `version`, or "" if it is.
/// The columns of the tables both have come first (the likeliest mistake: a
/// table that shares a name with one of runner's), then missing tables, then
/// extra ones. Only tables runner's schema names are inspected column by
/// column: pragma_table_info on a foreign virtual table could fail for want
/// of its module.
std::string layout_mismatch(sqlite3* db, int version) {
  const Layout& expected = expected_layout(version);
  const std::vector<std::string> found = table_names(db);
  const std::string claim = "it claims runner schema version " + std::to_string(version) + ", but ";
  const auto has = [&](const std::string& table) {
    return std::binary_search(found.begin(), found.end(), table);
  };
  for (const auto& [table, columns] : expected) {
    if (!has(table)) continue;
    const std::vector<std::string> actual = column_names(db, table);
    if (actual != columns)
      return claim + "table '" + table + "' has columns " + joined(actual) + ", not runner's " +
             joined(columns);
  }
  for (const auto& [table, columns] : expected) {
    if (!has(table)) return claim + "it has no table '" + table + "'";
  }
  for (const std::string& table : found) {
    if (expected.count(table) == 0)
      return claim + "it has a table '" + table + "' that runner's schema does not";
  }
  return "";
}

/// A read snapshot: the version and the tables are read as one state even
/// while another runner migrates the file.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(sqlite3* db) : db_(db) { exec(db_, "BEGIN"); }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  ~ReadSnapshot() { sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr); }

 private:
  sqlite3* db_;
};

bool has_user_objects(sqlite3* db) {
  Statement stmt(db, "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'");
  return stmt.step() && stmt.int64(0) > 0;
}

}  // namespace

Error newer_schema_error(const std::filesystem::path& path, int version) {
  return Error("database " + quoted(path) + " has schema version " + std::to_string(version) +
                   ", newer than this runner supports (" + std::to_string(kSchemaVersion) + ")",
               "upgrade runner, or use another database with --db");
}

Error foreign_file_error(const std::filesystem::path& path, const std::string& reason) {
  return Error(quoted(path) + " is not a runner database: " + reason,
               "choose another file with --db PATH or RUNNER_DB");
}

Identity identify(sqlite3* db, const std::filesystem::path& path) {
  const ReadSnapshot snapshot(db);
  const int version = read_user_version(db);
  if (version > kSchemaVersion) throw newer_schema_error(path, version);
  if (version < 0)
    throw foreign_file_error(path, "its schema version is " + std::to_string(version));
  if (version == 0) {
    if (has_user_objects(db))
      throw foreign_file_error(path, "it has tables but no runner schema version");
    return {0, true};
  }
  if (const std::string why = layout_mismatch(db, version); !why.empty())
    throw foreign_file_error(path, why);
  return {version, false};
}

}  // namespace runner::store::detail
