#include "runner/store/store.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <string_view>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"

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

// A "running" run whose heartbeat is older than kStaleHeartbeatSeconds: its
// process died without a verdict. One spelling, shared by the v2 views and the
// C++ queries, so that every reader agrees. The views freeze the number: a
// different threshold needs a new migration that recreates them. These
// macros are part of the text of the released v2 step: never edit them;
// define new ones for a new step.
#define RUNNER_STALE_SECONDS "60"
#define RUNNER_IS_STALE(r)                                                         \
  "(" r ".status = 'running' AND julianday(" r ".heartbeat_at) < julianday('now') - " \
  RUNNER_STALE_SECONDS " / 86400.0)"
// The error text of a run found stale (mark_stale_runs_interrupted, merge).
#define RUNNER_STALE_ERROR(r)                                                         \
  "('no heartbeat since ' || " r ".heartbeat_at || coalesce(' (pid ' || " r ".pid || ')', '') || " \
  "'; the runner process stopped without recording a verdict')"
#define RUNNER_EFFECTIVE_STATUS(r) \
  "(CASE WHEN " RUNNER_IS_STALE(r) " THEN 'interrupted' ELSE " r ".status END)"

// Version 2: trial identity (config hash + plugin hashes) and sweep label;
// runs get pid, signal and a uuid that identifies them across databases
// (merge); the views show the effective status. Dropping the UNIQUE
// (experiment_id, config_hash) constraint needs a table rebuild (SQLite's
// ALTER TABLE cannot drop constraints); runs is rebuilt too so that uuid can
// be NOT NULL UNIQUE. Ids are copied, so every reference stays valid. New
// columns go last, so `SELECT *` positions of version 1 do not move.
//
// v1 runs get a uuid derived from their own content and their id, not a
// random one: the same v1 file migrated twice (in place, or as a temporary
// copy by merge) yields the same uuids, so merging it twice adds nothing.
// runner_sha256() is registered on every connection the store opens; it is
// used only here, never in a view or default, because other SQLite clients
// do not have it.
constexpr const char* kSchemaV2 = R"sql(
DROP VIEW run_overview;
DROP VIEW run_summaries;

CREATE TABLE trials_v2 (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  config_json   TEXT NOT NULL,
  config_hash   TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  identity      TEXT NOT NULL,
  label         TEXT,
  UNIQUE (experiment_id, identity)
);
INSERT INTO trials_v2 (id, experiment_id, config_json, config_hash, created_at, identity, label)
SELECT id, experiment_id, config_json, config_hash, created_at, config_hash, NULL FROM trials;
DROP TABLE trials;
ALTER TABLE trials_v2 RENAME TO trials;
CREATE INDEX trials_config_hash ON trials(config_hash);

CREATE TABLE runs_v2 (
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
  pid            INTEGER CHECK (pid > 0),
  signal         INTEGER CHECK (signal > 0),
  uuid           TEXT NOT NULL UNIQUE CHECK (length(uuid) = 32),
  CHECK ((status = 'running') = (finished_at IS NULL))
);
INSERT INTO runs_v2 (id, trial_id, fingerprint_id, repeat_index, kind, status, error, seed, rank,
                     load_average, started_at, finished_at, heartbeat_at, pid, signal, uuid)
SELECT r.id, r.trial_id, r.fingerprint_id, r.repeat_index, r.kind, r.status, r.error, r.seed,
       r.rank, r.load_average, r.started_at, r.finished_at, r.heartbeat_at, NULL, NULL,
       substr(runner_sha256('runner-v1-run|' || r.id || '|' || r.trial_id || '|' ||
                            coalesce(t.config_hash, '') || '|' || coalesce(e.source_sha256, '') ||
                            '|' || r.repeat_index || '|' || r.rank || '|' || r.started_at), 1, 32)
FROM runs AS r
LEFT JOIN trials AS t ON t.id = r.trial_id
LEFT JOIN experiments AS e ON e.id = t.experiment_id;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_trial_id ON runs(trial_id);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_fingerprint_id ON runs(fingerprint_id);

CREATE VIEW run_overview AS
SELECT r.id            AS run_id,
       e.name          AS experiment,
       r.trial_id      AS trial_id,
       t.config_hash   AS config_hash,
       r.repeat_index  AS repeat_index,
       r.kind          AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       r.rank          AS rank,
       r.started_at    AS started_at,
       r.finished_at   AS finished_at,
       round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3) AS duration_s,
       s.p50           AS p50_ns,
       m.value         AS samples_per_s,
       r.error         AS error,
       r.status        AS stored_status,
       t.label         AS label,
       t.identity      AS identity,
       r.heartbeat_at  AS heartbeat_at,
       r.pid           AS pid,
       r.signal        AS signal,
       r.uuid          AS uuid
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
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       s.metric       AS metric,
       s.unit         AS unit,
       s.n            AS n,
       s.mean         AS mean,
       s.stddev       AS stddev,
       s.min          AS min,
       s.p50          AS p50,
       s.p90          AS p90,
       s.p99          AS p99,
       s.max          AS max,
       r.status       AS stored_status,
       t.label        AS label,
       t.identity     AS identity
FROM summaries AS s
JOIN runs AS r ON r.id = s.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

// Version 3 (measurement, issue 4): host-to-device and communication phases
// per sample; p5, p95 and the coefficient of variation per summary; the peak
// FLOP/s measured once per fingerprint, device and dtype. run_summaries gains
// the new statistics (a view, so it is recreated).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE samples ADD COLUMN h2d_ns REAL;
ALTER TABLE samples ADD COLUMN comm_ns REAL;
ALTER TABLE summaries ADD COLUMN p5 REAL;
ALTER TABLE summaries ADD COLUMN p95 REAL;
ALTER TABLE summaries ADD COLUMN cv REAL;

CREATE TABLE peaks (
  fingerprint_id INTEGER NOT NULL REFERENCES fingerprints(id) ON DELETE CASCADE,
  device         TEXT NOT NULL,
  dtype          TEXT NOT NULL,
  flop_per_s     REAL NOT NULL CHECK (flop_per_s > 0),
  method         TEXT NOT NULL,
  measured_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  PRIMARY KEY (fingerprint_id, device, dtype)
);

DROP VIEW run_summaries;
CREATE VIEW run_summaries AS
SELECT r.id           AS run_id,
       e.name         AS experiment,
       r.trial_id     AS trial_id,
       t.config_hash  AS config_hash,
       r.repeat_index AS repeat_index,
       r.kind         AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       s.metric       AS metric,
       s.unit         AS unit,
       s.n            AS n,
       s.mean         AS mean,
       s.stddev       AS stddev,
       s.min          AS min,
       s.p50          AS p50,
       s.p90          AS p90,
       s.p99          AS p99,
       s.max          AS max,
       r.status       AS stored_status,
       t.label        AS label,
       t.identity     AS identity,
       s.p5           AS p5,
       s.p95          AS p95,
       s.cv           AS cv
FROM summaries AS s
JOIN runs AS r ON r.id = s.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

#undef RUNNER_NOW

constexpr int parse_decimal(const char* text) {
  int value = 0;
  for (; *text != '\0'; ++text) value = value * 10 + (*text - '0');
  return value;
}
static_assert(parse_decimal(RUNNER_STALE_SECONDS) == kStaleHeartbeatSeconds,
              "the views' stale threshold must match kStaleHeartbeatSeconds");

constexpr std::array<const char*, 3> kMigrations = {kSchemaV1, kSchemaV2, kSchemaV3};
static_assert(kMigrations.size() == static_cast<std::size_t>(kSchemaVersion),
              "one migration step per schema version");

constexpr std::array<const char*, 6> kFinalStatuses = {
    kStatusFinished, kStatusFailed,      kStatusCrashed,
    kStatusTimeout,  kStatusInterrupted, kStatusDiverged};

constexpr const char* kWritableHint = "choose a writable path with --db PATH or RUNNER_DB";

/// 128 random bits as 32 lowercase hex digits. std::random_device reads the
/// OS (or the CPU) on every call, so forked processes do not repeat each
/// other, as they would with SQLite's randomblob() and its process-wide PRNG
/// state copied by fork.
std::string random_uuid() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string out;
  out.reserve(32);
  for (int word = 0; word < 4; ++word) {
    std::uint32_t bits = device();
    for (int nibble = 0; nibble < 8; ++nibble, bits >>= 4U) out.push_back(kHex[bits & 0xFU]);
  }
  return out;
}

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
  /// Binds column `column` of another statement's current row, whatever its
  /// type (used to copy rows between databases without reinterpreting them).
  void bind_column(int index, const Statement& from, int column) {
    check(sqlite3_bind_value(stmt_.get(), index, sqlite3_column_value(from.stmt_.get(), column)));
  }

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

/// Brings the file to kSchemaVersion, one step per transaction so that a
/// failed step leaves the file at the previous, consistent version.
void migrate(sqlite3* db, const std::filesystem::path& path) {
  int version = read_user_version(db);
  if (version > kSchemaVersion) throw newer_schema_error(path, version);
  if (version == 0 && has_user_objects(db))
    throw foreign_file_error(path, "it has tables but no runner schema version");
  if (version == kSchemaVersion) return;
  const ForeignKeysOff foreign_keys_off(db);
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

/// Opens an existing runner database read-only, checking that it is one and
/// that this runner can read its version (returned in `version`).
Connection open_checked_read_only(const std::filesystem::path& path, int& version) {
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
    version = read_user_version(db.get());
    if (version > kSchemaVersion) throw newer_schema_error(path, version);
    if (version == 0) {
      throw foreign_file_error(path, has_user_objects(db.get())
                                         ? "it has tables but no runner schema version"
                                         : "it is empty");
    }
  } catch (const SqliteError& e) {
    throw_open_error(path, e, true);
  }
  return db;
}

/// A connection at kSchemaVersion on an existing runner database: the file
/// itself, read-only, or, for an older version, a migrated private temporary
/// copy (the file is never written; the copy is deleted when the connection
/// closes and refuses writes like the file would).
Connection open_current_read_only(const std::filesystem::path& path) {
  int version = 0;
  Connection db = open_checked_read_only(path, version);
  if (version == kSchemaVersion) return db;
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
  return Store(open_current_read_only(path).release());
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
                                 const std::string& config_hash, const std::string& identity,
                                 const std::string& label) {
  return with_context("cannot record trial " + identity, [&] {
    // A label is descriptive, not identity: the same configuration reached
    // under another label is the same trial. The first label written stays,
    // but a trial recorded without one gets one.
    Statement insert(db_,
                     "INSERT INTO trials (experiment_id, config_json, config_hash, identity, label) "
                     "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (experiment_id, identity) "
                     "DO UPDATE SET label = excluded.label "
                     "WHERE trials.label IS NULL AND excluded.label IS NOT NULL");
    insert.bind_int(1, experiment_id);
    insert.bind_text(2, config_json);
    insert.bind_text(3, config_hash);
    insert.bind_text(4, identity);
    insert.bind_text_or_null(5, label);
    insert.run();
    Statement find(db_,
                   "SELECT id, config_json, config_hash FROM trials "
                   "WHERE experiment_id = ?1 AND identity = ?2");
    find.bind_int(1, experiment_id);
    find.bind_text(2, identity);
    if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "row vanished after insert");
    // Equal identities with different contents mean the caller's hashing is
    // broken; silently reusing the row would attach runs to the wrong configuration.
    if (find.text(1) != config_json || find.text(2) != config_hash)
      throw Error("trial " + identity + " is already stored with a different configuration", {},
                  ErrorKind::run);
    return find.int64(0);
  });
}

std::optional<std::int64_t> Store::find_experiment(const std::string& name,
                                                   const std::string& source_text) const {
  return with_context("cannot look up experiment '" + name + "'",
                      [&]() -> std::optional<std::int64_t> {
                        Statement find(db_,
                                       "SELECT id FROM experiments "
                                       "WHERE name = ?1 AND source_sha256 = ?2");
                        find.bind_text(1, name);
                        find.bind_text(2, sha256_hex(source_text));
                        if (!find.step()) return std::nullopt;
                        return find.int64(0);
                      });
}

std::optional<std::int64_t> Store::find_trial(std::int64_t experiment_id,
                                              const std::string& identity) const {
  return with_context("cannot look up trial " + identity, [&]() -> std::optional<std::int64_t> {
    Statement find(db_, "SELECT id FROM trials WHERE experiment_id = ?1 AND identity = ?2");
    find.bind_int(1, experiment_id);
    find.bind_text(2, identity);
    if (!find.step()) return std::nullopt;
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
                     "seed, rank, load_average, pid, uuid) "
                     "VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9)");
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
    insert.bind_int(8, start.pid > 0 ? start.pid : static_cast<std::int64_t>(::getpid()));
    insert.bind_text(9, random_uuid());
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
                     "backward_ns, optimizer_ns, loss, h2d_ns, comm_ns) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
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
      bind_phase(insert, 10, sample.h2d_ns);
      bind_phase(insert, 11, sample.comm_ns);
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
                       const std::vector<Summary>& summaries, const std::vector<Metric>& metrics,
                       int signal) {
  const std::string doing = "cannot finish run " + std::to_string(run_id);
  bool known = false;
  for (const char* final_status : kFinalStatuses) known = known || status == final_status;
  if (!known) {
    throw Error(doing + ": invalid status '" + status +
                    "' (expected finished, failed, crashed, timeout, interrupted or diverged)",
                {}, ErrorKind::run);
  }
  if (signal < 0 || (signal > 0 && status == kStatusFinished)) {
    throw Error(doing + ": invalid signal " + std::to_string(signal) + " for status '" + status +
                    "' (expected 0, or a positive signal number for a run that did not finish)",
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
                     "UPDATE runs SET status = ?2, error = ?3, signal = ?4, "
                     "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                     "heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1");
    update.bind_int(1, run_id);
    update.bind_text(2, status);
    update.bind_text_or_null(3, error);
    if (signal > 0) {
      update.bind_int(4, signal);
    } else {
      update.bind_null(4);
    }
    update.run();

    Statement insert_summary(db_,
                             "INSERT INTO summaries (run_id, metric, unit, n, mean, stddev, min, "
                             "p50, p90, p99, max, p5, p95, cv) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
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
      insert_summary.bind_real(12, s.p5);
      insert_summary.bind_real(13, s.p95);
      insert_summary.bind_real(14, s.cv);
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

bool Store::mark_interrupted(std::int64_t run_id, const std::string& error) {
  return with_context("cannot mark run " + std::to_string(run_id) + " interrupted", [&] {
    Transaction tx(db_);
    Statement update(db_,
                     "UPDATE runs SET status = 'interrupted', error = ?2, "
                     "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                     "heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
                     "WHERE id = ?1 AND status = 'running'");
    update.bind_int(1, run_id);
    update.bind_text_or_null(2, error);
    update.run();
    const bool changed = sqlite3_changes(db_) > 0;
    if (!changed) {
      Statement exists(db_, "SELECT 1 FROM runs WHERE id = ?1");
      exists.bind_int(1, run_id);
      if (!exists.step()) throw SqliteError(SQLITE_NOTFOUND, "no such run");
    }
    tx.commit();
    return changed;
  });
}

std::int64_t Store::mark_stale_runs_interrupted() {
  return with_context("cannot mark stale runs interrupted", [&] {
    // finished_at = heartbeat_at: the last moment the run is known to have
    // been alive, which also satisfies the finished_at/status CHECK.
    Statement update(db_,
                     "UPDATE runs SET status = 'interrupted', finished_at = heartbeat_at, "
                     "error = coalesce(error, " RUNNER_STALE_ERROR("runs") ") "
                     "WHERE " RUNNER_IS_STALE("runs"));
    update.run();
    return static_cast<std::int64_t>(sqlite3_changes(db_));
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
    "coalesce(finished_at, ''), p50_ns, stored_status, coalesce(label, '')";

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
  row.stored_status = stmt.text(9);
  row.label = stmt.text(10);
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
                      "coalesce(f.json, ''), coalesce(f.hash, ''), r.load_average, r.seed, r.rank, "
                      "t.experiment_id, t.identity, r.uuid, r.heartbeat_at, r.pid, r.signal "
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
      detail.experiment_id = query.int64(8);
      detail.identity = query.text(9);
      detail.uuid = query.text(10);
      detail.heartbeat_at = query.text(11);
      if (!query.is_null(12)) detail.pid = query.int64(12);
      if (!query.is_null(13)) detail.signal = static_cast<int>(query.int64(13));
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
                      "SELECT metric, unit, n, mean, stddev, min, p50, p90, p99, max, p5, p95, cv "
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
        s.p5 = query.real(10, kNaN);
        s.p95 = query.real(11, kNaN);
        s.cv = query.real(12, kNaN);
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
                    "loss, h2d_ns, comm_ns FROM samples WHERE run_id = ?1 ORDER BY step");
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
      s.h2d_ns = query.real(8, -1);
      s.comm_ns = query.real(9, -1);
      out.push_back(s);
    }
    return out;
  });
}

std::vector<TrialRun> Store::runs_of_trial(std::int64_t trial_id) const {
  return with_context("cannot read the runs of trial " + std::to_string(trial_id), [&] {
    Statement query(db_,
                    "SELECT id, repeat_index, rank, " RUNNER_EFFECTIVE_STATUS("runs") ", status "
                    "FROM runs WHERE trial_id = ?1 ORDER BY repeat_index, rank, id");
    query.bind_int(1, trial_id);
    std::vector<TrialRun> out;
    while (query.step()) {
      TrialRun run;
      run.run_id = query.int64(0);
      run.repeat_index = query.int64(1);
      run.rank = query.int64(2);
      run.status = query.text(3);
      run.stored_status = query.text(4);
      out.push_back(std::move(run));
    }
    return out;
  });
}

std::vector<TrialRun> Store::runs_of_identity(const std::string& identity) const {
  return with_context("cannot read the runs of trial " + identity.substr(0, 12), [&] {
    Statement query(db_,
                    "SELECT runs.id, runs.repeat_index, runs.rank, " RUNNER_EFFECTIVE_STATUS("runs")
                    ", runs.status FROM runs JOIN trials ON trials.id = runs.trial_id "
                    "WHERE trials.identity = ?1 ORDER BY runs.repeat_index, runs.rank, runs.id");
    query.bind_text(1, identity);
    std::vector<TrialRun> out;
    while (query.step()) {
      TrialRun run;
      run.run_id = query.int64(0);
      run.repeat_index = query.int64(1);
      run.rank = query.int64(2);
      run.status = query.text(3);
      run.stored_status = query.text(4);
      out.push_back(std::move(run));
    }
    return out;
  });
}

std::vector<TrialInfo> Store::trials_of_experiment(const std::string& name) const {
  return with_context("cannot read the trials of experiment '" + name + "'", [&] {
    Statement query(db_,
                    "SELECT trials.id, trials.config_json, coalesce(trials.label, ''), "
                    "trials.identity FROM trials JOIN experiments ON experiments.id = "
                    "trials.experiment_id WHERE experiments.name = ?1 ORDER BY trials.id");
    query.bind_text(1, name);
    std::vector<TrialInfo> out;
    while (query.step()) out.push_back({query.int64(0), query.text(1), query.text(2), query.text(3)});
    return out;
  });
}

std::vector<RunningRun> Store::running_runs() const {
  return with_context("cannot list running runs", [&] {
    Statement query(db_,
                    "SELECT runs.id, runs.pid, "
                    "json_extract(fingerprints.json, '$.\"host.hostname\"') "
                    "FROM runs LEFT JOIN fingerprints ON fingerprints.id = runs.fingerprint_id "
                    "WHERE runs.status = 'running' ORDER BY runs.id");
    std::vector<RunningRun> out;
    while (query.step()) {
      RunningRun run;
      run.run_id = query.int64(0);
      run.pid = query.is_null(1) ? 0 : query.int64(1);
      run.hostname = query.is_null(2) ? std::string() : query.text(2);
      out.push_back(std::move(run));
    }
    return out;
  });
}

std::optional<double> Store::peak_flop_per_s(std::int64_t fingerprint_id, const std::string& device,
                                             const std::string& dtype) const {
  return with_context("cannot read the measured peak", [&]() -> std::optional<double> {
    Statement query(db_,
                    "SELECT flop_per_s FROM peaks WHERE fingerprint_id = ?1 AND device = ?2 AND "
                    "dtype = ?3");
    query.bind_int(1, fingerprint_id);
    query.bind_text(2, device);
    query.bind_text(3, dtype);
    if (!query.step()) return std::nullopt;
    return query.real(0, kNaN);
  });
}

void Store::set_peak_flop_per_s(std::int64_t fingerprint_id, const std::string& device,
                                const std::string& dtype, double flop_per_s,
                                const std::string& method) {
  with_context("cannot record the measured peak", [&] {
    Statement insert(db_,
                     "INSERT OR REPLACE INTO peaks (fingerprint_id, device, dtype, flop_per_s, "
                     "method) VALUES (?1, ?2, ?3, ?4, ?5)");
    insert.bind_int(1, fingerprint_id);
    insert.bind_text(2, device);
    insert.bind_text(3, dtype);
    insert.bind_real(4, flop_per_s);
    insert.bind_text(5, method);
    insert.run();
  });
}

void Store::set_run_fingerprint(std::int64_t run_id, std::int64_t fingerprint_id) {
  with_context("cannot set the fingerprint of run " + std::to_string(run_id), [&] {
    Statement update(db_, "UPDATE runs SET fingerprint_id = ?2 WHERE id = ?1");
    update.bind_int(1, run_id);
    update.bind_int(2, fingerprint_id);
    update.run();
    if (sqlite3_changes(db_) == 0) throw SqliteError(SQLITE_NOTFOUND, "no such run");
  });
}

// ---------------------------------------------------------------------------
// Merging

MergeCounts& MergeCounts::operator+=(const MergeCounts& other) {
  for (auto [mine, theirs] :
       {std::pair{&experiments, &other.experiments}, std::pair{&trials, &other.trials},
        std::pair{&fingerprints, &other.fingerprints}, std::pair{&runs, &other.runs},
        std::pair{&run_plugins, &other.run_plugins}, std::pair{&samples, &other.samples},
        std::pair{&summaries, &other.summaries}, std::pair{&metrics, &other.metrics}}) {
    mine->added += theirs->added;
    mine->present += theirs->present;
  }
  runs_running += other.runs_running;
  return *this;
}

namespace {

/// BEGIN ... ROLLBACK on an input: every table is read from one snapshot,
/// even while a runner is still writing to that file (WAL readers see the
/// database as of their first read).
class ReadSnapshot {
 public:
  explicit ReadSnapshot(sqlite3* db) : db_(db) { exec(db_, "BEGIN"); }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;
  ~ReadSnapshot() { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

 private:
  sqlite3* db_;
};

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

/// The id found by a one-row lookup, leaving the statement ready for reuse.
std::optional<std::int64_t> lookup_id(Statement& find) {
  std::optional<std::int64_t> id;
  if (find.step()) id = find.int64(0);
  find.reset();
  return id;
}

using IdMap = std::unordered_map<std::int64_t, std::int64_t>;

/// Copies one input (at kSchemaVersion) into `dst`, inside the caller's
/// transaction. Ids of the input are mapped to ids of `dst`; identities
/// decide what is already there.
class Merger {
 public:
  Merger(sqlite3* dst, sqlite3* src, const std::filesystem::path& path)
      : dst_(dst), src_(src), prefix_("cannot merge database " + quoted(path) + ": ") {}

  MergeCounts run() {
    const ReadSnapshot snapshot(src_);
    experiments();
    fingerprints();
    trials();
    runs();
    children("run_plugins", {"kind", "name", "library", "version", "sha256"}, counts_.run_plugins);
    children("samples",
             {"step", "warmup", "wall_ns", "data_ns", "forward_ns", "backward_ns", "optimizer_ns",
              "loss", "h2d_ns", "comm_ns"},
             counts_.samples);
    children("summaries",
             {"metric", "unit", "n", "mean", "stddev", "min", "p50", "p90", "p99", "max", "p5", "p95",
              "cv"},
             counts_.summaries);
    children("metrics", {"name", "value", "unit"}, counts_.metrics);
    return counts_;
  }

 private:
  /// The input's own references are broken (a client deleted rows with
  /// foreign keys off); copying would break the target's.
  [[noreturn]] void dangling(const std::string& rows, const std::string& refers,
                             std::int64_t id) const {
    throw Error(prefix_ + rows + " refer to " + refers + " " + std::to_string(id) +
                    ", which is not in it",
                "check the input with 'PRAGMA foreign_key_check'");
  }

  std::int64_t mapped(const IdMap& map, std::int64_t id, const std::string& rows,
                      const std::string& refers) const {
    const auto it = map.find(id);
    if (it == map.end()) dangling(rows, refers, id);
    return it->second;
  }

  std::int64_t last_id() const { return static_cast<std::int64_t>(sqlite3_last_insert_rowid(dst_)); }

  void experiments() {
    Statement read(src_,
                   "SELECT id, name, source_path, source_text, source_sha256, created_at "
                   "FROM experiments ORDER BY id");
    Statement find(dst_, "SELECT id FROM experiments WHERE name = ?1 AND source_sha256 = ?2");
    Statement insert(dst_,
                     "INSERT INTO experiments (name, source_path, source_text, source_sha256, "
                     "created_at) VALUES (?1, ?2, ?3, ?4, ?5)");
    while (read.step()) {
      find.bind_column(1, read, 1);
      find.bind_column(2, read, 4);
      if (const auto id = lookup_id(find)) {
        experiments_[read.int64(0)] = *id;
        ++counts_.experiments.present;
        continue;
      }
      insert.reset();
      for (int c = 1; c <= 5; ++c) insert.bind_column(c, read, c);
      insert.run();
      experiments_[read.int64(0)] = last_id();
      ++counts_.experiments.added;
    }
  }

  void fingerprints() {
    Statement read(src_, "SELECT id, hash, json, created_at FROM fingerprints ORDER BY id");
    Statement find(dst_, "SELECT id, json FROM fingerprints WHERE hash = ?1");
    Statement insert(dst_, "INSERT INTO fingerprints (hash, json, created_at) VALUES (?1, ?2, ?3)");
    while (read.step()) {
      find.bind_column(1, read, 1);
      if (find.step()) {
        if (find.text(1) != read.text(2))
          throw Error(prefix_ + "fingerprint " + read.text(1) +
                      " is already stored with different contents");
        fingerprints_[read.int64(0)] = find.int64(0);
        find.reset();
        ++counts_.fingerprints.present;
        continue;
      }
      find.reset();
      insert.reset();
      for (int c = 1; c <= 3; ++c) insert.bind_column(c, read, c);
      insert.run();
      fingerprints_[read.int64(0)] = last_id();
      ++counts_.fingerprints.added;
    }
  }

  void trials() {
    Statement read(src_,
                   "SELECT t.id, t.experiment_id, t.config_json, t.config_hash, t.created_at, "
                   "t.identity, t.label, coalesce(e.name, '') FROM trials AS t "
                   "LEFT JOIN experiments AS e ON e.id = t.experiment_id ORDER BY t.id");
    Statement find(dst_,
                   "SELECT id, config_json, config_hash FROM trials "
                   "WHERE experiment_id = ?1 AND identity = ?2");
    Statement insert(dst_,
                     "INSERT INTO trials (experiment_id, config_json, config_hash, created_at, "
                     "identity, label) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    Statement label(dst_, "UPDATE trials SET label = ?2 WHERE id = ?1 AND label IS NULL");
    while (read.step()) {
      const std::int64_t experiment =
          mapped(experiments_, read.int64(1), "trials", "experiment");
      find.bind_int(1, experiment);
      find.bind_column(2, read, 5);
      if (find.step()) {
        if (find.text(1) != read.text(2) || find.text(2) != read.text(3))
          throw Error(prefix_ + "trial " + read.text(5) + " of experiment '" + read.text(7) +
                      "' is already stored with a different configuration");
        const std::int64_t id = find.int64(0);
        find.reset();
        // Same rule as upsert_trial: a trial stored without a label gets one.
        if (!read.is_null(6)) {
          label.reset();
          label.bind_int(1, id);
          label.bind_column(2, read, 6);
          label.run();
        }
        trials_[read.int64(0)] = id;
        ++counts_.trials.present;
        continue;
      }
      find.reset();
      insert.reset();
      insert.bind_int(1, experiment);
      for (int c = 2; c <= 6; ++c) insert.bind_column(c, read, c);
      insert.run();
      trials_[read.int64(0)] = last_id();
      ++counts_.trials.added;
    }
  }

  void runs() {
    // A stale run is copied with the status every reader shows for it, and
    // with what mark_stale_runs_interrupted() would write, so that the
    // target does not keep a "running" row no process will ever finish.
    Statement read(src_,
                   "SELECT id, trial_id, fingerprint_id, repeat_index, kind, "
                   RUNNER_EFFECTIVE_STATUS("runs") ", "
                   "CASE WHEN " RUNNER_IS_STALE("runs") " THEN coalesce(error, "
                   RUNNER_STALE_ERROR("runs") ") ELSE error END, "
                   "seed, rank, load_average, started_at, "
                   "CASE WHEN " RUNNER_IS_STALE("runs") " THEN heartbeat_at ELSE finished_at END, "
                   "heartbeat_at, pid, signal, uuid FROM runs ORDER BY id");
    Statement find(dst_, "SELECT id FROM runs WHERE uuid = ?1");
    Statement insert(dst_,
                     "INSERT INTO runs (trial_id, fingerprint_id, repeat_index, kind, status, "
                     "error, seed, rank, load_average, started_at, finished_at, heartbeat_at, pid, "
                     "signal, uuid) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    while (read.step()) {
      const std::int64_t id = read.int64(0);
      if (read.text(5) == kStatusRunning) {
        // Alive: its runner may still write samples and a verdict to the
        // input; a copy now would stay "running" here forever.
        running_.insert(id);
        ++counts_.runs_running;
        continue;
      }
      find.bind_column(1, read, 15);
      if (lookup_id(find)) {
        present_.insert(id);
        ++counts_.runs.present;
        continue;
      }
      insert.reset();
      insert.bind_int(1, mapped(trials_, read.int64(1), "runs", "trial"));
      if (!read.is_null(2)) {
        insert.bind_int(2, mapped(fingerprints_, read.int64(2), "runs", "fingerprint"));
      }
      for (int c = 3; c <= 15; ++c) insert.bind_column(c, read, c);
      insert.run();
      runs_[id] = last_id();
      ++counts_.runs.added;
    }
  }

  /// Copies the rows of a table keyed by run_id for the runs copied above.
  void children(const std::string& table, const std::vector<std::string>& columns,
                TableCounts& counts) {
    std::string list;
    std::string params;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      list += ", " + columns[i];
      params += ", ?" + std::to_string(i + 2);
    }
    Statement read(src_, "SELECT run_id" + list + " FROM " + table);
    Statement insert(dst_, "INSERT INTO " + table + " (run_id" + list + ") VALUES (?1" + params + ")");
    const int width = static_cast<int>(columns.size());
    // Rows come clustered by run_id; remember the last lookup.
    std::int64_t last_source = -1;
    std::optional<std::int64_t> last_target;
    while (read.step()) {
      const std::int64_t run = read.int64(0);
      if (run != last_source) {
        last_source = run;
        const auto it = runs_.find(run);
        last_target = it == runs_.end() ? std::nullopt : std::optional(it->second);
        if (!last_target && present_.count(run) == 0 && running_.count(run) == 0)
          dangling(table + " rows", "run", run);
      }
      if (!last_target) {
        if (present_.count(run) != 0) ++counts.present;
        continue;
      }
      insert.reset();
      insert.bind_int(1, *last_target);
      for (int c = 1; c <= width; ++c) insert.bind_column(c + 1, read, c);
      insert.run();
      ++counts.added;
    }
  }

  sqlite3* dst_;
  sqlite3* src_;
  std::string prefix_;
  MergeCounts counts_;
  IdMap experiments_, fingerprints_, trials_, runs_;
  std::unordered_set<std::int64_t> present_;  ///< input runs already in the target
  std::unordered_set<std::int64_t> running_;  ///< input runs not copied: still alive
};

}  // namespace

MergeCounts Store::merge_from(const std::filesystem::path& other) {
  return merge_from(std::vector<std::filesystem::path>{other}).front();
}

std::vector<MergeCounts> Store::merge_from(const std::vector<std::filesystem::path>& others) {
  const char* name = sqlite3_db_filename(db_, "main");
  const std::filesystem::path target = name != nullptr ? name : "";
  // Every input is checked before anything is written, so that a bad one
  // named last does not leave the others half-merged. They are opened again
  // one at a time below, so that a thousand shards do not need a thousand
  // open files.
  for (const auto& other : others) {
    if (!target.empty() && same_file(target, other))
      throw Error("cannot merge database " + quoted(other) + " into itself",
                  "merge into another file");
    int version = 0;
    open_checked_read_only(other, version);
  }
  return with_context("cannot merge into " + quoted(target), [&] {
    std::vector<MergeCounts> counts;
    Transaction tx(db_);
    for (const auto& other : others) {
      const Connection source = open_current_read_only(other);
      counts.push_back(Merger(db_, source.get(), other).run());
    }
    tx.commit();
    return counts;
  });
}

const char* detail::migration_sql(int version) {
  if (version < 1 || version > kSchemaVersion)
    throw std::out_of_range("no migration step for schema version " + std::to_string(version));
  return kMigrations[static_cast<std::size_t>(version - 1)];
}

}  // namespace runner::store
