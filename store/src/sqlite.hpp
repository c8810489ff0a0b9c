// The store's private SQLite layer: errors, prepared statements,
// transactions, connections. Low-level failures are SqliteError (code +
// SQLite's own message); the Store functions translate them with
// with_context(), adding what was being done, so the user sees one
// runner::Error and the open path can tell "not a database" from
// "read-only" by code.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/store/store.hpp"

namespace runner::store::detail {

class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] int primary_code() const { return code_ & 0xFF; }

 private:
  int code_;
};

/// Throws the SqliteError for `code`, with the connection's message when there is one.
[[noreturn]] void raise(sqlite3* db, int code);

/// Runs SQL that returns no rows (several statements allowed).
void exec(sqlite3* db, const char* sql);

/// Opens a connection (SQLite's flags) with runner's SQL functions registered.
Connection open_connection(const std::filesystem::path& path, int flags);

/// The file name of a connection's main database ("" for a temporary one).
[[nodiscard]] std::filesystem::path file_of(sqlite3* db);

struct StatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};

/// A prepared statement; bind indices and column indices follow SQLite
/// (binds are 1-based, columns 0-based). NaN doubles bind as NULL so that
/// "no value" has one representation in the file.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);

  void bind_int(int index, std::int64_t value);
  void bind_real(int index, double value);
  /// Negative or NaN binds NULL: a phase that does not apply.
  void bind_duration(int index, double ns);
  void bind_text(int index, std::string_view value);
  /// Empty text means "not known" for optional columns.
  void bind_text_or_null(int index, std::string_view value);
  void bind_null(int index);
  /// Binds column `column` of another statement's current row, whatever its
  /// type (used to copy rows between databases without reinterpreting them).
  void bind_column(int index, const Statement& from, int column);

  /// True while a row is available; throws on error.
  bool step();
  /// Runs a statement that returns no rows.
  void run();
  /// Makes the statement ready for the next row of a batch.
  void reset();

  [[nodiscard]] bool is_null(int column) const;
  [[nodiscard]] std::int64_t int64(int column) const;
  /// NULL reads back as `if_null`.
  [[nodiscard]] double real(int column, double if_null) const;
  [[nodiscard]] std::string text(int column) const;

 private:
  void check(int rc);

  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, StatementFinalizer> stmt_;
};

/// BEGIN IMMEDIATE ... COMMIT, rolled back unless committed. IMMEDIATE takes
/// the write lock up front, so a concurrent writer waits on busy_timeout at
/// BEGIN instead of failing half-way through with SQLITE_BUSY.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  bool committed_ = false;
};

/// The runner::Error for a SqliteError, prefixed with what was being done,
/// with a hint for the failures a user can do something about.
[[nodiscard]] Error context_error(const std::string& doing, const SqliteError& e);

/// Runs `body`, turning a SqliteError into the runner::Error the CLI reports,
/// prefixed with what was being done.
template <typename Body>
auto with_context(const std::string& doing, Body&& body) -> decltype(body()) {
  try {
    return std::forward<Body>(body)();
  } catch (const SqliteError& e) {
    throw context_error(doing, e);
  }
}

}  // namespace runner::store::detail
