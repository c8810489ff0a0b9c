#include "sqlite.hpp"

#include <cmath>

#include "runner/common/sha256.hpp"

namespace runner::store::detail {

void ConnectionCloser::operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }

void raise(sqlite3* db, int code) {
  throw SqliteError(code, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code));
}

void exec(sqlite3* db, const char* sql) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) raise(db, rc);
}

namespace {

/// runner_sha256(text): lowercase hex SHA-256, for migration steps only.
void sql_sha256(sqlite3_context* context, int /*argc*/, sqlite3_value** argv) {
  // A C callback: nothing may escape it.
  try {
    const auto* data = static_cast<const char*>(sqlite3_value_blob(argv[0]));
    const auto size = static_cast<std::size_t>(sqlite3_value_bytes(argv[0]));
    const std::string hex = sha256_hex(std::string_view(data != nullptr ? data : "", size));
    sqlite3_result_text64(context, hex.data(), hex.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  } catch (const std::exception& e) {
    sqlite3_result_error(context, e.what(), -1);
  }
}

}  // namespace

Connection open_connection(const std::filesystem::path& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  // sqlite3_open_v2 hands out a handle even on failure; it must be closed.
  Connection db(raw);
  if (rc != SQLITE_OK) raise(db.get(), rc);
  const int fn = sqlite3_create_function_v2(db.get(), "runner_sha256", 1,
                                            SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                                            &sql_sha256, nullptr, nullptr, nullptr);
  if (fn != SQLITE_OK) raise(db.get(), fn);
  return db;
}

std::filesystem::path file_of(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name != nullptr ? name : "";
}

// --- Statement ----------------------------------------------------------------

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  stmt_.reset(raw);
  if (rc != SQLITE_OK) raise(db_, rc);
}

void Statement::bind_int(int index, std::int64_t value) {
  check(sqlite3_bind_int64(stmt_.get(), index, value));
}

void Statement::bind_real(int index, double value) {
  if (std::isnan(value)) {
    bind_null(index);
  } else {
    check(sqlite3_bind_double(stmt_.get(), index, value));
  }
}

void Statement::bind_duration(int index, double ns) {
  // Negative in memory, NULL on disk, so that SQL aggregates (avg, count)
  // skip a phase that did not happen instead of averaging -1s.
  if (ns < 0 || std::isnan(ns)) {
    bind_null(index);
  } else {
    bind_real(index, ns);
  }
}

void Statement::bind_text(int index, std::string_view value) {
  check(sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_TRANSIENT,
                            SQLITE_UTF8));
}

void Statement::bind_text_or_null(int index, std::string_view value) {
  if (value.empty()) {
    bind_null(index);
  } else {
    bind_text(index, value);
  }
}

void Statement::bind_null(int index) { check(sqlite3_bind_null(stmt_.get(), index)); }

void Statement::bind_column(int index, const Statement& from, int column) {
  check(sqlite3_bind_value(stmt_.get(), index, sqlite3_column_value(from.stmt_.get(), column)));
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  raise(db_, rc);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
}

std::int64_t Statement::int64(int column) const {
  return sqlite3_column_int64(stmt_.get(), column);
}

double Statement::real(int column, double if_null) const {
  return is_null(column) ? if_null : sqlite3_column_double(stmt_.get(), column);
}

std::string Statement::text(int column) const {
  const auto* data = sqlite3_column_text(stmt_.get(), column);
  if (data == nullptr) return {};
  const int size = sqlite3_column_bytes(stmt_.get(), column);
  return {reinterpret_cast<const char*>(data), static_cast<std::size_t>(size)};
}

void Statement::check(int rc) {
  if (rc != SQLITE_OK) raise(db_, rc);
}

// --- Transaction ----------------------------------------------------------------

Transaction::Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  exec(db_, "COMMIT");
  committed_ = true;
}

// --- errors -------------------------------------------------------------------

Error context_error(const std::string& doing, const SqliteError& e) {
  std::string hint;
  if (e.primary_code() == SQLITE_BUSY) {
    hint = "another process is writing to this database; wait for it, or use another file with --db";
  } else if (e.primary_code() == SQLITE_FULL) {
    hint = "free some disk space, or use a database on another disk with --db";
  }
  return Error(doing + ": " + e.what(), std::move(hint), ErrorKind::run);
}

}  // namespace runner::store::detail
