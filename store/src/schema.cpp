// Opening a store: checking what the file is, migrating it, the read-only
// path through a migrated temporary copy; and the conversions of stored text.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "schema.hpp"

namespace runner::store {
namespace detail {
namespace {

constexpr const char* kWritableHint = "choose a writable path with --db PATH or RUNNER_DB";

/// Switches foreign key enforcement off for its lifetime and restores it.
/// Migration steps rebuild tables; with enforcement on, DROP TABLE of the old
/// copy would cascade-delete every row that refers to it. The pragma is a
/// no-op inside a transaction, so this wraps the step transactions.
class ForeignKeysOff {
 public:
  explicit ForeignKeysOff(sqlite3* db) : db_(db) {
    Statement query(db_, "PRAGMA foreign_keys");
    was_on_ = query.step() && query.int64(0) != 0;
    if (was_on_) exec(db_, "PRAGMA foreign_keys = OFF");
  }
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;
  ~ForeignKeysOff() {
    if (was_on_) sqlite3_exec(db_, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr);
  }

 private:
  sqlite3* db_;
  bool was_on_ = false;
};

/// Maps a failure while opening to the user-facing error for that path.
[[noreturn]] void throw_open_error(const std::filesystem::path& path, const SqliteError& e,
                                   bool read_only) {
  if (e.primary_code() == SQLITE_NOTADB) throw foreign_file_error(path, e.what());
  if (read_only) {
    throw Error("cannot read database " + quoted(path) + ": " + e.what(),
                "check the path and its permissions, or pass --db PATH");
  }
  throw Error("cannot write database " + quoted(path) + ": " + e.what(), kWritableHint);
}

[[noreturn]] void throw_not_writable(const std::filesystem::path& path, int error_number) {
  throw Error("cannot write database " + quoted(path) + ": " + std::strerror(error_number),
              kWritableHint);
}

/// The hint for a value in the file that runner did not write.
constexpr const char* kForeignValueHint =
    "another program wrote it; correct the row with an SQLite client, or use another database "
    "with --db";

}  // namespace

std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

int read_user_version(sqlite3* db) {
  Statement stmt(db, "PRAGMA user_version");
  return stmt.step() ? static_cast<int>(stmt.int64(0)) : 0;
}

void migrate(sqlite3* db, const std::filesystem::path& path) {
  int version = identify(db, path).version;
  if (version == kSchemaVersion) return;
  const ForeignKeysOff foreign_keys_off(db);
  while (version < kSchemaVersion) {
    Transaction tx(db);
    // Another process may have migrated between our read and our write lock.
    version = read_user_version(db);
    if (version >= kSchemaVersion) break;
    ++version;
    exec(db, migration_step(version));
    exec(db, ("PRAGMA user_version = " + std::to_string(version)).c_str());
    tx.commit();
  }
}

Connection open_checked_read_only(const std::filesystem::path& path, int& version,
                                  EmptyFile empty) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    // An unreadable directory; then SQLite reports the real reason below.
    if (errno == ENOENT && empty == EmptyFile::none) return {};
    if (errno == ENOENT)
      throw Error("database " + quoted(path) + " does not exist",
                  "run an experiment first with 'runner run FILE', or pass --db PATH");
  } else if (!S_ISREG(info.st_mode)) {
    // SQLite would open a FIFO and wait for a writer forever.
    throw foreign_file_error(path, S_ISDIR(info.st_mode) ? "it is a directory"
                                                         : "it is not a regular file");
  }
  Connection db;
  try {
    db = open_connection(path, SQLITE_OPEN_READONLY);
    exec(db.get(), "PRAGMA busy_timeout = 5000");
    const Identity identity = identify(db.get(), path);
    version = identity.version;
    if (identity.empty) {
      if (empty == EmptyFile::none) return {};
      throw foreign_file_error(path, "it is empty");
    }
  } catch (const SqliteError& e) {
    throw_open_error(path, e, true);
  }
  return db;
}

Connection open_current_read_only(const std::filesystem::path& path, EmptyFile empty) {
  int version = 0;
  Connection db = open_checked_read_only(path, version, empty);
  if (!db || version == kSchemaVersion) return db;
  try {
    // An empty name is a private on-disk temporary database, removed on close.
    Connection copy = open_connection("", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    sqlite3_backup* backup = sqlite3_backup_init(copy.get(), "main", db.get(), "main");
    if (backup == nullptr) raise(copy.get(), sqlite3_errcode(copy.get()));
    sqlite3_backup_step(backup, -1);
    const int rc = sqlite3_backup_finish(backup);
    if (rc != SQLITE_OK) raise(copy.get(), rc);
    migrate(copy.get(), path);
    exec(copy.get(), "PRAGMA foreign_keys = ON");
    exec(copy.get(), "PRAGMA query_only = ON");
    return copy;
  } catch (const SqliteError& e) {
    throw_open_error(path, e, true);
  }
}

const std::vector<std::string>& sample_columns() {
  static const std::vector<std::string> columns = [] {
    std::vector<std::string> out = {"step", "warmup", "wall_ns", "loss"};
    for (const PhaseInfo& phase : kPhases) out.emplace_back(phase.column);
    for (const char* column : {"lr", "grad_norm", "loss_scale", "skipped", "rank_max_ns",
                               "rank_median_ns", "profiled"})
      out.emplace_back(column);
    return out;
  }();
  return columns;
}

RunStatus status_from_sql(std::string_view text, const std::filesystem::path& db) {
  try {
    return parse_run_status(text);
  } catch (const Error& e) {
    throw Error("database " + quoted(db) + ": " + e.what(), kForeignValueHint);
  }
}

RunKind kind_from_sql(std::string_view text, const std::filesystem::path& db) {
  try {
    return parse_run_kind(text);
  } catch (const Error& e) {
    throw Error("database " + quoted(db) + ": " + e.what(), kForeignValueHint);
  }
}

}  // namespace detail

using detail::Connection;

Store::Store(Connection db, std::filesystem::path path)
    : db_(std::move(db)), path_(std::move(path)) {}

void Store::check_writable(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) detail::throw_not_writable(path, EISDIR);
    if (!S_ISREG(info.st_mode))
      throw Error("cannot write database " + detail::quoted(path) + ": not a regular file",
                  "choose a writable path with --db PATH or RUNNER_DB");
    if (::access(path.c_str(), W_OK) != 0) detail::throw_not_writable(path, errno);
  } else if (errno != ENOENT) {
    detail::throw_not_writable(path, errno);
  }
  // Whether or not the file exists, its directory must take new files: the
  // database itself, or (in WAL mode) its -wal and -shm companions.
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  if (::stat(parent.c_str(), &info) != 0) detail::throw_not_writable(path, errno);
  if (!S_ISDIR(info.st_mode)) detail::throw_not_writable(path, ENOTDIR);
  if (::access(parent.c_str(), W_OK | X_OK) != 0) detail::throw_not_writable(path, errno);
}

Store Store::open(const std::filesystem::path& path) {
  // Ask the OS first: its reason ("Permission denied") is clearer than
  // SQLite's "unable to open database file".
  check_writable(path);
  // A file that already holds something is identified read-only before it is
  // opened for writing, whatever its user_version: switching to WAL would
  // change another application's file (its header's bytes 18 and 19) before
  // migrate() could refuse it.
  if (struct stat info {}; ::stat(path.c_str(), &info) == 0 && info.st_size > 0) {
    try {
      const Connection probe = detail::open_connection(path, SQLITE_OPEN_READONLY);
      detail::exec(probe.get(), "PRAGMA busy_timeout = 5000");
      static_cast<void>(detail::identify(probe.get(), path));
    } catch (const detail::SqliteError& e) {
      detail::throw_open_error(path, e, false);
    }
  }
  Connection db;
  try {
    db = detail::open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // busy_timeout first, so that switching to WAL waits for other writers.
    detail::exec(db.get(), "PRAGMA busy_timeout = 5000");
    detail::exec(db.get(), "PRAGMA journal_mode = WAL");
    detail::exec(db.get(), "PRAGMA foreign_keys = ON");
    // Safe with WAL: a power loss may lose the last commits, never corrupt.
    detail::exec(db.get(), "PRAGMA synchronous = NORMAL");
    detail::migrate(db.get(), path);
  } catch (const detail::SqliteError& e) {
    detail::throw_open_error(path, e, false);
  }
  return Store(std::move(db), path);
}

Store Store::open_read_only(const std::filesystem::path& path) {
  return Store(detail::open_current_read_only(path), path);
}

std::optional<Store> Store::open_read_only_if_recorded(const std::filesystem::path& path) {
  Connection db = detail::open_current_read_only(path, detail::EmptyFile::none);
  if (!db) return std::nullopt;
  return Store(std::move(db), path);
}

int Store::schema_version() const {
  return detail::with_context("cannot read the schema version",
                              [&] { return detail::read_user_version(db_.get()); });
}

}  // namespace runner::store
