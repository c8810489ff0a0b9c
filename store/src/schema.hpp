// The schema, shared by opening, writing, reading and merging: the migration
// steps, the SQL spellings every reader must agree on, and the conversions of
// stored text to the store's types.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "runner/common/run_kind.hpp"
#include "runner/store/run_status.hpp"
#include "sqlite.hpp"

// A "running" run whose heartbeat is older than kStaleHeartbeatSeconds: its
// process died without a verdict. One spelling, shared by the v2 views and the
// C++ queries, so that every reader agrees. The views freeze the number: a
// different threshold needs a new migration that recreates them. These
// macros are part of the text of the released v2 step: never edit them;
// define new ones for a new step. (Macros, not constants, because the
// migration steps are built by string-literal concatenation.)
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

namespace runner::store::detail {

/// The SQL of the step that creates schema `version` from the one before
/// (1: the initial schema). Throws std::out_of_range for an unknown version.
[[nodiscard]] const char* migration_step(int version);

/// PRAGMA user_version.
[[nodiscard]] int read_user_version(sqlite3* db);

/// Brings the file to kSchemaVersion, one step per transaction so that a
/// failed step leaves the file at the previous, consistent version. Throws
/// runner::Error for a newer or foreign file (`path` names it).
void migrate(sqlite3* db, const std::filesystem::path& path);

/// What a file that SQLite can open turned out to be.
struct Identity {
  int version = 0;     ///< its schema version (0: nothing yet)
  bool empty = false;  ///< no schema version and no tables: a store not yet created
};

/// Identifies the file behind `db` (a connection that has written nothing)
/// as a runner database of a version this runner reads, or an empty file.
/// Throws runner::Error for a newer version or for another application's
/// file: a schema version outside 1..kSchemaVersion, or tables and columns
/// other than exactly those of runner's schema at that version.
[[nodiscard]] Identity identify(sqlite3* db, const std::filesystem::path& path);

/// The error for a file of a schema version newer than kSchemaVersion.
[[nodiscard]] Error newer_schema_error(const std::filesystem::path& path, int version);
/// The error for a file that is not a runner database, saying why.
[[nodiscard]] Error foreign_file_error(const std::filesystem::path& path,
                                       const std::string& reason);

/// What opening read-only does with a file that holds nothing yet (no
/// schema version, no tables): refuse it as "empty", or give no connection
/// (another runner may be creating the database at this moment).
enum class EmptyFile { refuse, none };

/// Opens an existing runner database read-only, checking that it is one and
/// that this runner can read its version (returned in `version`). With
/// EmptyFile::none, an absent or empty file gives a null connection.
[[nodiscard]] Connection open_checked_read_only(const std::filesystem::path& path, int& version,
                                                EmptyFile empty = EmptyFile::refuse);

/// A connection at kSchemaVersion on an existing runner database: the file
/// itself, read-only, or, for an older version, a migrated private temporary
/// copy (the file is never written; the copy is deleted when the connection
/// closes and refuses writes like the file would). `empty` as above.
[[nodiscard]] Connection open_current_read_only(const std::filesystem::path& path,
                                                EmptyFile empty = EmptyFile::refuse);

/// 'path', as messages quote a database.
[[nodiscard]] std::string quoted(const std::filesystem::path& path);

/// The columns of the samples table that the store writes, reads and
/// merges, in this order: step, warmup, wall_ns, loss, then one per phase
/// in kPhases order.
[[nodiscard]] const std::vector<std::string>& sample_columns();
/// Position of the first phase column in sample_columns().
inline constexpr int kFirstPhaseColumn = 4;
/// Index of "lr" (then grad_norm, loss_scale, skipped, rank_max_ns,
/// rank_median_ns, profiled) in sample_columns().
inline constexpr int kFirstRecipeColumn = kFirstPhaseColumn + static_cast<int>(kPhaseCount);

/// runs.status text read from the database `db` (a runner::Error naming the
/// database and the value if it is not a status).
[[nodiscard]] RunStatus status_from_sql(std::string_view text, const std::filesystem::path& db);
/// runs.kind text read from the database `db` (a runner::Error naming the
/// database and the value if it is not a kind).
[[nodiscard]] RunKind kind_from_sql(std::string_view text, const std::filesystem::path& db);

}  // namespace runner::store::detail
