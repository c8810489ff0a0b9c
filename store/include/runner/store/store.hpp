// The results store: one SQLite file, schema versioned with PRAGMA
// user_version and migrated forward on open, WAL mode, a busy timeout and
// foreign keys on. No LibTorch here. The schema is documented in docs/store.md.
#pragma once

#include <cstdint>
#include <limits>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace runner::store {

/// Schema version this build writes (PRAGMA user_version).
inline constexpr int kSchemaVersion = 1;

/// Run statuses as stored in runs.status.
inline constexpr const char* kStatusRunning = "running";
inline constexpr const char* kStatusFinished = "finished";
inline constexpr const char* kStatusFailed = "failed";
inline constexpr const char* kStatusCrashed = "crashed";
inline constexpr const char* kStatusTimeout = "timeout";
inline constexpr const char* kStatusInterrupted = "interrupted";
inline constexpr const char* kStatusDiverged = "diverged";

/// A run about to start.
struct RunStart {
  std::int64_t trial_id = 0;
  std::int64_t fingerprint_id = 0;
  std::int64_t repeat_index = 0;   ///< 0-based repetition of the trial
  std::string kind;                ///< "train" | "infer"
  std::int64_t seed = 0;
  std::int64_t rank = 0;
  double load_average = 0.0;       ///< 1-minute load at start (volatile, so not in the fingerprint)
};

/// A plugin library used by a run.
struct PluginRecord {
  std::string kind;      ///< "model", "optimizer", ...
  std::string name;
  std::string library;   ///< absolute path of the shared library
  std::string version;   ///< the library's own version string
  std::string sha256;    ///< of the library file
};

/// One measured step (train) or batch (infer). Phases that do not apply are
/// negative and stored as NULL.
struct Sample {
  std::int64_t step = 0;     ///< 0-based, warm-up steps included
  bool warmup = false;       ///< true for discarded warm-up steps
  double wall_ns = -1;       ///< whole step / batch latency
  double data_ns = -1;       ///< waiting for the batch
  double forward_ns = -1;
  double backward_ns = -1;
  double optimizer_ns = -1;
  double loss = std::numeric_limits<double>::quiet_NaN();  ///< NaN: none
};

/// Distribution statistics of one metric over the measured steps of a run.
struct Summary {
  std::string metric;   ///< "step_time", "forward", "latency", ...
  std::string unit;     ///< "ns", ...
  std::int64_t n = 0;
  double mean = 0, stddev = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

/// A scalar result of a run (samples_per_s, final_loss, ...).
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;
};

/// A row of `runner runs`.
struct RunRow {
  std::int64_t id = 0;
  std::string experiment;
  std::int64_t trial_id = 0;
  std::int64_t repeat_index = 0;
  std::string kind;
  std::string status;
  std::string started_at;      ///< ISO-8601 UTC
  std::string finished_at;     ///< empty while running
  std::optional<double> headline;  ///< p50 of step_time (train) or latency (infer), ns
};

/// Everything about one run, for `runner show`.
struct RunDetail {
  RunRow row;
  std::string error;               ///< error text of a failed run
  std::string config_json;         ///< the trial's resolved configuration
  std::string config_hash;
  std::string fingerprint_json;
  std::string fingerprint_hash;
  double load_average = 0;
  std::int64_t seed = 0;
  std::int64_t rank = 0;
  std::vector<PluginRecord> plugins;
  std::vector<Summary> summaries;
  std::vector<Metric> metrics;
  std::int64_t sample_count = 0;
};

/// An open store. Not thread-safe; one per thread.
class Store {
 public:
  /// Opens (creating the file if absent) and migrates to kSchemaVersion.
  /// Throws runner::Error (input kind) if the file cannot be opened or
  /// written, or was written by a newer schema version.
  static Store open(const std::filesystem::path& path);
  /// Opens an existing store read-only (no creation, no migration beyond a
  /// version check). Throws runner::Error if absent.
  static Store open_read_only(const std::filesystem::path& path);
  /// Throws runner::Error (input kind, naming the path and the OS reason) if
  /// `path` cannot be created or written; creates nothing.
  static void check_writable(const std::filesystem::path& path);

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  /// The schema version found in the file.
  [[nodiscard]] int schema_version() const;

  /// Finds or inserts the experiment (identity: name + SHA-256 of source text); returns its id.
  std::int64_t upsert_experiment(const std::string& name, const std::string& source_path,
                                 const std::string& source_text);
  /// Finds or inserts the trial (identity: experiment + config hash); returns its id.
  std::int64_t upsert_trial(std::int64_t experiment_id, const std::string& config_json,
                            const std::string& config_hash);
  /// Finds or inserts the fingerprint (identity: hash); returns its id.
  std::int64_t upsert_fingerprint(const std::string& hash, const std::string& json);

  /// Inserts a run with status "running" and started_at = heartbeat_at = now.
  std::int64_t begin_run(const RunStart& start);
  /// Records the plugin libraries the run loaded.
  void add_plugins(std::int64_t run_id, const std::vector<PluginRecord>& plugins);
  /// Appends samples in one transaction.
  void add_samples(std::int64_t run_id, const std::vector<Sample>& samples);
  /// Updates heartbeat_at = now.
  void heartbeat(std::int64_t run_id);
  /// Sets the final status (not "running"), error text, finished_at, and
  /// writes summaries and metrics, all in one transaction.
  void finish_run(std::int64_t run_id, const std::string& status, const std::string& error,
                  const std::vector<Summary>& summaries, const std::vector<Metric>& metrics);

  /// Most recent runs first.
  [[nodiscard]] std::vector<RunRow> list_runs(std::int64_t limit = 50) const;
  /// One run, or nullopt.
  [[nodiscard]] std::optional<RunDetail> get_run(std::int64_t run_id) const;
  /// The samples of a run, in step order.
  [[nodiscard]] std::vector<Sample> samples(std::int64_t run_id) const;

  /// The raw connection, for tests and tools.
  [[nodiscard]] sqlite3* handle() const { return db_; }

 private:
  explicit Store(sqlite3* db);
  sqlite3* db_ = nullptr;
};

}  // namespace runner::store
