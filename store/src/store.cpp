#include "runner/store/store.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "runner/core/common/error.hpp"
#include "runner/core/common/sha256.hpp"

namespace runner::store {
namespace {

// ---------------------------------------------------------------------------
// Schema. Each entry creates the version equal to its index + 1; a file at
// user_version N gets entries N.. applied in order. Never edit a released
// entry: a database written by it exists somewhere. Add a new one instead and
// bump kSchemaVersion (and docs/store.md).

#define RUNNER_NOW "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE experiments (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL,
  source_path   TEXT,
  source_text   TEXT,
  source_sha256 TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  UNIQUE (name, source_sha256)
);

CREATE TABLE trials (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  config_json   TEXT NOT NULL,
  config_hash   TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  UNIQUE (experiment_id, config_hash)
);

CREATE TABLE fingerprints (
  id         INTEGER PRIMARY KEY,
  hash       TEXT NOT NULL UNIQUE,
  json       TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(
);

CREATE TABLE runs (
  id             INTEGER PRIMARY KEY,
  trial_id       INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  fingerprint_id INTEGER REFERENCES fingerprints(id),
  repeat_index   INTEGER NOT NULL CHECK (repeat_index >= 0),
  kind           TEXT NOT NULL,
  status         TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'crashed',
                                                 'timeout', 'interrupted', 'diverged')),
  error          TEXT,
  seed           INTEGER NOT NULL,
  rank           INTEGER NOT NULL DEFAULT 0 CHECK (rank >= 0),
  load_average   REAL,
  started_at     TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  finished_at    TEXT,
  heartbeat_at   TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX runs_trial_id ON runs(trial_id);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_fingerprint_id ON runs(fingerprint_id);

CREATE TABLE run_plugins (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind    TEXT NOT NULL,
  name    TEXT NOT NULL,
  library TEXT NOT NULL,
  version TEXT NOT NULL,
  sha256  TEXT NOT NULL,
  PRIMARY KEY (run_id, kind, name)
);

CREATE TABLE samples (
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step         INTEGER NOT NULL CHECK (step >= 0),
  warmup       INTEGER NOT NULL CHECK (warmup IN (0, 1)),
  wall_ns      REAL,
  data_ns      REAL,
  forward_ns   REAL,
  backward_ns  REAL,
  optimizer_ns REAL,
  loss         REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE summaries (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  metric TEXT NOT NULL,
  unit   TEXT NOT NULL,
  n      INTEGER NOT NULL CHECK (n >= 0),
  mean   REAL,
  stddev REAL,
  min    REAL,
  p50    REAL,
  p90    REAL,
  p99    REAL,
  max    REAL,
  PRIMARY KEY (run_id, metric)
);

CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name   TEXT NOT NULL,
  value  REAL,
  unit   TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);

CREATE VIEW run_overview AS
SELECT r.id            AS run_id,
       e.name          AS experiment,
       r.trial_id      AS trial_id,
       t.config_hash   AS config_hash,
       r.repeat_index  AS repeat_index,
       r.kind          AS kind,
       r.status        AS status,
       r.rank          AS rank,
       r.started_at    AS started_at,
       r.finished_at   AS finished_at,
       round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3) AS duration_s,
       s.p50           AS p50_ns,
       m.value         AS samples_per_s,
       r.error         AS error
FROM runs AS r
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id
LEFT JOIN summaries AS s
  ON s.run_id = r.id AND s.metric = CASE r.kind WHEN 'infer' THEN 'latency' ELSE 'step_time' END
LEFT JOIN metrics AS m ON m.run_id = r.id AND m.name = 'samples_per_s';

CREATE VIEW run_summaries AS
SELECT r.id           AS run_id,
       e.name         AS experiment,
       r.trial_id     AS trial_id,
       t.config_hash  AS config_hash,
       r.repeat_index AS repeat_index,
       r.kind         AS kind,
       r.status       AS status,
       s.metric       AS metric,
       s.unit         AS unit,
       s.n            AS n,
       s.mean         AS mean,
       s.stddev       AS stddev,
       s.min          AS min,
       s.p50          AS p50,
       s.p90          AS p90,
       s.p99          AS p99,
       s.max          AS max
FROM summaries AS s
JOIN runs AS r ON r.id = s.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

#undef RUNNER_NOW

constexpr std::array<const char*, 1> kMigrations = {kSchemaV1};
static_assert(kMigrations.size() == static_cast<std::size_t>(kSchemaVersion),
              "one migration step per schema version");

constexpr std::array<const char*, 6> kFinalStatuses = {
    kStatusFinished, kStatusFailed,      kStatusCrashed,
    kStatusTimeout,  kStatusInterrupted, kStatusDiverged};

constexpr const char* kWritableHint = "choose a writable path with --db PATH or RUNNER_DB";

// ---------------------------------------------------------------------------
// SQLite plumbing. Low-level failures are SqliteError (code + sqlite's own
// message); the public functions translate them, adding what was being done,
// so the user sees one runner::Error and the open path can tell "not a
// database" from "read-only" by code.

class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] int primary_code() const { return code_ & 0xFF; }

 private:
  int code_;
};

[[noreturn]] void raise(sqlite3* db, int code) {
  throw SqliteError(code, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code));
}

void exec(sqlite3* db, const char* sql) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) raise(db, rc);
}

struct StatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};

/// A prepared statement; bind indices and column indices follow SQLite
/// (binds are 1-based, columns 0-based). NaN doubles bind as NULL so that
/// "no value" has one representation in the file.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql) : db_(db) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    stmt_.reset(raw);
    if (rc != SQLITE_OK) raise(db_, rc);
  }

  void bind_int(int index, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_.get(), index, value));
  }
  void bind_real(int index, double value) {
    if (std::isnan(value)) {
      bind_null(index);
    } else {
      check(sqlite3_bind_double(stmt_.get(), index, value));
    }
  }
  void bind_text(int index, std::string_view value) {
    check(sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }
  /// Empty text means "not known" for optional columns.
  void bind_text_or_null(int index, std::string_view value) {
    if (value.empty()) {
      bind_null(index);
    } else {
      bind_text(index, value);
    }
  }
  void bind_null(int index) { check(sqlite3_bind_null(stmt_.get(), index)); }

  /// True while a row is available; throws on error.
  bool step() {
    const int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    raise(db_, rc);
  }
  /// Runs a statement that returns no rows.
  void run() {
    while (step()) {
    }
  }
  /// Makes the statement ready for the next row of a batch.
  void reset() {
    sqlite3_reset(stmt_.get());
    sqlite3_clear_bindings(stmt_.get());
  }

  [[nodiscard]] bool is_null(int column) const {
    return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
  }
  [[nodiscard]] std::int64_t int64(int column) const {
    return sqlite3_column_int64(stmt_.get(), column);
  }
  /// NULL reads back as `if_null`.
  [[nodiscard]] double real(int column, double if_null) const {
    return is_null(column) ? if_null : sqlite3_column_double(stmt_.get(), column);
  }
  [[nodiscard]] std::string text(int column) const {
    const auto* data = sqlite3_column_text(stmt_.get(), column);
    if (data == nullptr) return {};
    const int size = sqlite3_column_bytes(stmt_.get(), column);
    return {reinterpret_cast<const char*>(data), static_cast<std::size_t>(size)};
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) raise(db_, rc);
  }

  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, StatementFinalizer> stmt_;
};

/// BEGIN IMMEDIATE ... COMMIT, rolled back unless committed. IMMEDIATE takes
/// the write lock up front, so a concurrent writer waits on busy_timeout at
/// BEGIN instead of failing half-way through with SQLITE_BUSY.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

struct ConnectionCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Connection = std::unique_ptr<sqlite3, ConnectionCloser>;

/// Runs `body`, turning a SqliteError into the runner::Error the CLI reports,
/// prefixed with what was being done.
template <typename Body>
auto with_context(const std::string& doing, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const SqliteError& e) {
    std::string hint;
    if (e.primary_code() == SQLITE_BUSY) {
      hint = "another process is writing to this database; wait for it, or use another file with --db";
    } else if (e.primary_code() == SQLITE_FULL) {
      hint = "free some disk space, or use a database on another disk with --db";
    }
    throw Error(doing + ": " + e.what(), std::move(hint), ErrorKind::run);
  }
}

int read_user_version(sqlite3* db) {
  Statement stmt(db, "PRAGMA user_version");
  return stmt.step() ? static_cast<int>(stmt.int64(0)) : 0;
}

bool has_user_objects(sqlite3* db) {
  Statement stmt(db, "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'");
  return stmt.step() && stmt.int64(0) > 0;
}

std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

Error newer_schema_error(const std::filesystem::path& path, int version) {
  return Error("database " + quoted(path) + " has schema version " + std::to_string(version) +
                   ", newer than this runner supports (" + std::to_string(kSchemaVersion) + ")",
               "upgrade runner, or use another database with --db");
}

Error foreign_file_error(const std::filesystem::path& path, const std::string& reason) {
  return Error(quoted(path) + " is not a runner database: " + reason,
               "choose another file with --db PATH or RUNNER_DB");
}

/// Brings the file to kSchemaVersion, one step per transaction so that a
/// failed step leaves the file at the previous, consistent version.
void migrate(sqlite3* db, const std::filesystem::path& path) {
  int version = read_user_version(db);
  if (version > kSchemaVersion) throw newer_schema_error(path, version);
  if (version == 0 && has_user_objects(db))
    throw foreign_file_error(path, "it has tables but no runner schema version");
  while (version < kSchemaVersion) {
    Transaction tx(db);
    // Another process may have migrated between our read and our write lock.
    version = read_user_version(db);
    if (version >= kSchemaVersion) break;
    exec(db, kMigrations[static_cast<std::size_t>(version)]);
    ++version;
    exec(db, ("PRAGMA user_version = " + std::to_string(version)).c_str());
    tx.commit();
  }
}

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

Connection open_connection(const std::filesystem::path& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  // sqlite3_open_v2 hands out a handle even on failure; it must be closed.
  Connection db(raw);
  if (rc != SQLITE_OK) raise(db.get(), rc);
  return db;
}

[[noreturn]] void throw_not_writable(const std::filesystem::path& path, int error_number) {
  throw Error("cannot write database " + quoted(path) + ": " + std::strerror(error_number),
              kWritableHint);
}

}  // namespace

// ---------------------------------------------------------------------------
// Opening

Store::Store(sqlite3* db) : db_(db) {}

Store::Store(Store&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

Store::~Store() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Store::check_writable(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) throw_not_writable(path, EISDIR);
    if (!S_ISREG(info.st_mode)) throw_not_writable(path, EINVAL);
    if (::access(path.c_str(), W_OK) != 0) throw_not_writable(path, errno);
  } else if (errno != ENOENT) {
    throw_not_writable(path, errno);
  }
  // Whether or not the file exists, its directory must take new files: the
  // database itself, or (in WAL mode) its -wal and -shm companions.
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  if (::stat(parent.c_str(), &info) != 0) throw_not_writable(path, errno);
  if (!S_ISDIR(info.st_mode)) throw_not_writable(path, ENOTDIR);
  if (::access(parent.c_str(), W_OK | X_OK) != 0) throw_not_writable(path, errno);
}

Store Store::open(const std::filesystem::path& path) {
  // Ask the OS first: its reason ("Permission denied") is clearer than
  // SQLite's "unable to open database file".
  check_writable(path);
  Connection db;
  try {
    db = open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // busy_timeout first, so that switching to WAL waits for other writers.
    exec(db.get(), "PRAGMA busy_timeout = 5000");
    exec(db.get(), "PRAGMA journal_mode = WAL");
    exec(db.get(), "PRAGMA foreign_keys = ON");
    // Safe with WAL: a power loss may lose the last commits, never corrupt.
    exec(db.get(), "PRAGMA synchronous = NORMAL");
    migrate(db.get(), path);
  } catch (const SqliteError& e) {
    throw_open_error(path, e, false);
  }
  return Store(db.release());
}

Store Store::open_read_only(const std::filesystem::path& path) {
  std::error_code ec;
  // An unreadable directory sets `ec`; then SQLite reports the real reason.
  if (!std::filesystem::exists(path, ec) && !ec) {
    throw Error("database " + quoted(path) + " does not exist",
                "run an experiment first with 'runner run FILE', or pass --db PATH");
  }
  Connection db;
  try {
    db = open_connection(path, SQLITE_OPEN_READONLY);
    exec(db.get(), "PRAGMA busy_timeout = 5000");
    const int version = read_user_version(db.get());
    if (version > kSchemaVersion) throw newer_schema_error(path, version);
    if (version == 0) {
      throw foreign_file_error(path, has_user_objects(db.get())
                                         ? "it has tables but no runner schema version"
                                         : "it is empty");
    }
  } catch (const SqliteError& e) {
    throw_open_error(path, e, true);
  }
  return Store(db.release());
}

int Store::schema_version() const {
  return with_context("cannot read the schema version", [&] { return read_user_version(db_); });
}

// ---------------------------------------------------------------------------
// Writing

std::int64_t Store::upsert_experiment(const std::string& name, const std::string& source_path,
                                      const std::string& source_text) {
  return with_context("cannot record experiment '" + name + "'", [&] {
    const std::string sha = sha256_hex(source_text);
    Statement insert(db_,
                     "INSERT INTO experiments (name, source_path, source_text, source_sha256) "
                     "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name, source_sha256) DO NOTHING");
    insert.bind_text(1, name);
    insert.bind_text_or_null(2, source_path);
    insert.bind_text_or_null(3, source_text);
    insert.bind_text(4, sha);
    insert.run();
    Statement find(db_, "SELECT id FROM experiments WHERE name = ?1 AND source_sha256 = ?2");
    find.bind_text(1, name);
    find.bind_text(2, sha);
    if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "row vanished after insert");
    return find.int64(0);
  });
}

std::int64_t Store::upsert_trial(std::int64_t experiment_id, const std::string& config_json,
                                 const std::string& config_hash) {
  return with_context("cannot record trial " + config_hash, [&] {
    Statement insert(db_,
                     "INSERT INTO trials (experiment_id, config_json, config_hash) "
                     "VALUES (?1, ?2, ?3) ON CONFLICT (experiment_id, config_hash) DO NOTHING");
    insert.bind_int(1, experiment_id);
    insert.bind_text(2, config_json);
    insert.bind_text(3, config_hash);
    insert.run();
    Statement find(db_,
                   "SELECT id, config_json FROM trials WHERE experiment_id = ?1 AND config_hash = ?2");
    find.bind_int(1, experiment_id);
    find.bind_text(2, config_hash);
    if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "row vanished after insert");
    // Equal hashes with different text mean the caller's hashing is broken;
    // silently reusing the row would attach runs to the wrong configuration.
    if (find.text(1) != config_json)
      throw Error("trial " + config_hash + " is already stored with a different configuration",
                  {}, ErrorKind::run);
    return find.int64(0);
  });
}

std::int64_t Store::upsert_fingerprint(const std::string& hash, const std::string& json) {
  return with_context("cannot record fingerprint " + hash, [&] {
    Statement insert(db_,
                     "INSERT INTO fingerprints (hash, json) VALUES (?1, ?2) "
                     "ON CONFLICT (hash) DO NOTHING");
    insert.bind_text(1, hash);
    insert.bind_text(2, json);
    insert.run();
    Statement find(db_, "SELECT id, json FROM fingerprints WHERE hash = ?1");
    find.bind_text(1, hash);
    if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "row vanished after insert");
    if (find.text(1) != json)
      throw Error("fingerprint " + hash + " is already stored with different contents", {},
                  ErrorKind::run);
    return find.int64(0);
  });
}

std::int64_t Store::begin_run(const RunStart& start) {
  return with_context("cannot record the start of a run", [&] {
    Statement insert(db_,
                     "INSERT INTO runs (trial_id, fingerprint_id, repeat_index, kind, status, "
                     "seed, rank, load_average) VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7)");
    insert.bind_int(1, start.trial_id);
    // 0 means "not fingerprinted"; a run is still worth recording without one.
    if (start.fingerprint_id > 0) {
      insert.bind_int(2, start.fingerprint_id);
    } else {
      insert.bind_null(2);
    }
    insert.bind_int(3, start.repeat_index);
    insert.bind_text(4, start.kind);
    insert.bind_int(5, start.seed);
    insert.bind_int(6, start.rank);
    insert.bind_real(7, start.load_average);
    insert.run();
    return static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_));
  });
}

void Store::add_plugins(std::int64_t run_id, const std::vector<PluginRecord>& plugins) {
  with_context("cannot record the plugins of run " + std::to_string(run_id), [&] {
    Transaction tx(db_);
    Statement insert(db_,
                     "INSERT INTO run_plugins (run_id, kind, name, library, version, sha256) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    for (const PluginRecord& plugin : plugins) {
      insert.reset();
      insert.bind_int(1, run_id);
      insert.bind_text(2, plugin.kind);
      insert.bind_text(3, plugin.name);
      insert.bind_text(4, plugin.library);
      insert.bind_text(5, plugin.version);
      insert.bind_text(6, plugin.sha256);
      insert.run();
    }
    tx.commit();
  });
}

void Store::add_samples(std::int64_t run_id, const std::vector<Sample>& samples) {
  with_context("cannot record the samples of run " + std::to_string(run_id), [&] {
    // Phases that do not apply are negative in memory and NULL on disk, so
    // that SQL aggregates (avg, count) skip them instead of averaging -1s.
    const auto bind_phase = [](Statement& stmt, int index, double ns) {
      if (ns < 0 || std::isnan(ns)) {
        stmt.bind_null(index);
      } else {
        stmt.bind_real(index, ns);
      }
    };
    Transaction tx(db_);
    Statement insert(db_,
                     "INSERT INTO samples (run_id, step, warmup, wall_ns, data_ns, forward_ns, "
                     "backward_ns, optimizer_ns, loss) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    for (const Sample& sample : samples) {
      insert.reset();
      insert.bind_int(1, run_id);
      insert.bind_int(2, sample.step);
      insert.bind_int(3, sample.warmup ? 1 : 0);
      bind_phase(insert, 4, sample.wall_ns);
      bind_phase(insert, 5, sample.data_ns);
      bind_phase(insert, 6, sample.forward_ns);
      bind_phase(insert, 7, sample.backward_ns);
      bind_phase(insert, 8, sample.optimizer_ns);
      insert.bind_real(9, sample.loss);  // NaN -> NULL
      insert.run();
    }
    tx.commit();
  });
}

void Store::heartbeat(std::int64_t run_id) {
  with_context("cannot update the heartbeat of run " + std::to_string(run_id), [&] {
    Statement update(db_,
                     "UPDATE runs SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
                     "WHERE id = ?1");
    update.bind_int(1, run_id);
    update.run();
    if (sqlite3_changes(db_) == 0) throw SqliteError(SQLITE_NOTFOUND, "no such run");
  });
}

void Store::finish_run(std::int64_t run_id, const std::string& status, const std::string& error,
                       const std::vector<Summary>& summaries, const std::vector<Metric>& metrics) {
  const std::string doing = "cannot finish run " + std::to_string(run_id);
  bool known = false;
  for (const char* final_status : kFinalStatuses) known = known || status == final_status;
  if (!known) {
    throw Error(doing + ": invalid status '" + status +
                    "' (expected finished, failed, crashed, timeout, interrupted or diverged)",
                {}, ErrorKind::run);
  }
  with_context(doing, [&] {
    Transaction tx(db_);
    {
      Statement current(db_, "SELECT status FROM runs WHERE id = ?1");
      current.bind_int(1, run_id);
      if (!current.step()) throw SqliteError(SQLITE_NOTFOUND, "no such run");
      // A second verdict would overwrite the first (e.g. a timeout racing a
      // clean finish); the first one written is the one that happened.
      if (current.text(0) != kStatusRunning)
        throw SqliteError(SQLITE_CONSTRAINT, "it already has status '" + current.text(0) + "'");
    }
    Statement update(db_,
                     "UPDATE runs SET status = ?2, error = ?3, "
                     "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                     "heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1");
    update.bind_int(1, run_id);
    update.bind_text(2, status);
    update.bind_text_or_null(3, error);
    update.run();

    Statement insert_summary(db_,
                             "INSERT INTO summaries (run_id, metric, unit, n, mean, stddev, min, "
                             "p50, p90, p99, max) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    for (const Summary& s : summaries) {
      insert_summary.reset();
      insert_summary.bind_int(1, run_id);
      insert_summary.bind_text(2, s.metric);
      insert_summary.bind_text(3, s.unit);
      insert_summary.bind_int(4, s.n);
      insert_summary.bind_real(5, s.mean);
      insert_summary.bind_real(6, s.stddev);
      insert_summary.bind_real(7, s.min);
      insert_summary.bind_real(8, s.p50);
      insert_summary.bind_real(9, s.p90);
      insert_summary.bind_real(10, s.p99);
      insert_summary.bind_real(11, s.max);
      insert_summary.run();
    }

    Statement insert_metric(db_,
                            "INSERT INTO metrics (run_id, name, value, unit) VALUES (?1, ?2, ?3, ?4)");
    for (const Metric& m : metrics) {
      insert_metric.reset();
      insert_metric.bind_int(1, run_id);
      insert_metric.bind_text(2, m.name);
      insert_metric.bind_real(3, m.value);
      insert_metric.bind_text(4, m.unit);
      insert_metric.run();
    }
    tx.commit();
  });
}

// ---------------------------------------------------------------------------
// Reading

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Shared by list_runs and get_run so that `runner runs` and `runner show`
// agree with the documented view an outside client queries.
constexpr const char* kRunRowColumns =
    "run_id, experiment, trial_id, repeat_index, kind, status, started_at, "
    "coalesce(finished_at, ''), p50_ns";

RunRow read_run_row(const Statement& stmt) {
  RunRow row;
  row.id = stmt.int64(0);
  row.experiment = stmt.text(1);
  row.trial_id = stmt.int64(2);
  row.repeat_index = stmt.int64(3);
  row.kind = stmt.text(4);
  row.status = stmt.text(5);
  row.started_at = stmt.text(6);
  row.finished_at = stmt.text(7);
  if (!stmt.is_null(8)) row.headline = stmt.real(8, kNaN);
  return row;
}

}  // namespace

std::vector<RunRow> Store::list_runs(std::int64_t limit) const {
  return with_context("cannot list runs", [&] {
    Statement query(db_, std::string("SELECT ") + kRunRowColumns +
                             " FROM run_overview ORDER BY run_id DESC LIMIT ?1");
    query.bind_int(1, limit);
    std::vector<RunRow> rows;
    while (query.step()) rows.push_back(read_run_row(query));
    return rows;
  });
}

std::optional<RunDetail> Store::get_run(std::int64_t run_id) const {
  return with_context("cannot read run " + std::to_string(run_id), [&]() -> std::optional<RunDetail> {
    RunDetail detail;
    {
      Statement query(db_, std::string("SELECT ") + kRunRowColumns +
                               " FROM run_overview WHERE run_id = ?1");
      query.bind_int(1, run_id);
      if (!query.step()) return std::nullopt;
      detail.row = read_run_row(query);
    }
    {
      Statement query(db_,
                      "SELECT coalesce(r.error, ''), t.config_json, t.config_hash, "
                      "coalesce(f.json, ''), coalesce(f.hash, ''), r.load_average, r.seed, r.rank "
                      "FROM runs AS r JOIN trials AS t ON t.id = r.trial_id "
                      "LEFT JOIN fingerprints AS f ON f.id = r.fingerprint_id WHERE r.id = ?1");
      query.bind_int(1, run_id);
      if (!query.step()) return std::nullopt;
      detail.error = query.text(0);
      detail.config_json = query.text(1);
      detail.config_hash = query.text(2);
      detail.fingerprint_json = query.text(3);
      detail.fingerprint_hash = query.text(4);
      detail.load_average = query.real(5, kNaN);
      detail.seed = query.int64(6);
      detail.rank = query.int64(7);
    }
    {
      Statement query(db_,
                      "SELECT kind, name, library, version, sha256 FROM run_plugins "
                      "WHERE run_id = ?1 ORDER BY kind, name");
      query.bind_int(1, run_id);
      while (query.step()) {
        detail.plugins.push_back(
            {query.text(0), query.text(1), query.text(2), query.text(3), query.text(4)});
      }
    }
    {
      Statement query(db_,
                      "SELECT metric, unit, n, mean, stddev, min, p50, p90, p99, max "
                      "FROM summaries WHERE run_id = ?1 ORDER BY metric");
      query.bind_int(1, run_id);
      while (query.step()) {
        Summary s;
        s.metric = query.text(0);
        s.unit = query.text(1);
        s.n = query.int64(2);
        s.mean = query.real(3, kNaN);
        s.stddev = query.real(4, kNaN);
        s.min = query.real(5, kNaN);
        s.p50 = query.real(6, kNaN);
        s.p90 = query.real(7, kNaN);
        s.p99 = query.real(8, kNaN);
        s.max = query.real(9, kNaN);
        detail.summaries.push_back(std::move(s));
      }
    }
    {
      Statement query(db_,
                      "SELECT name, value, unit FROM metrics WHERE run_id = ?1 ORDER BY name");
      query.bind_int(1, run_id);
      while (query.step())
        detail.metrics.push_back({query.text(0), query.real(1, kNaN), query.text(2)});
    }
    {
      Statement query(db_, "SELECT count(*) FROM samples WHERE run_id = ?1");
      query.bind_int(1, run_id);
      if (query.step()) detail.sample_count = query.int64(0);
    }
    return detail;
  });
}

std::vector<Sample> Store::samples(std::int64_t run_id) const {
  return with_context("cannot read the samples of run " + std::to_string(run_id), [&] {
    Statement query(db_,
                    "SELECT step, warmup, wall_ns, data_ns, forward_ns, backward_ns, optimizer_ns, "
                    "loss FROM samples WHERE run_id = ?1 ORDER BY step");
    query.bind_int(1, run_id);
    std::vector<Sample> out;
    while (query.step()) {
      Sample s;
      s.step = query.int64(0);
      s.warmup = query.int64(1) != 0;
      s.wall_ns = query.real(2, -1);
      s.data_ns = query.real(3, -1);
      s.forward_ns = query.real(4, -1);
      s.backward_ns = query.real(5, -1);
      s.optimizer_ns = query.real(6, -1);
      s.loss = query.real(7, kNaN);
      out.push_back(s);
    }
    return out;
  });
}

}  // namespace runner::store
