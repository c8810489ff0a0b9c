// The results store: one SQLite file, schema versioned with PRAGMA
// user_version and migrated forward on open, WAL mode, a busy timeout and
// foreign keys on. No LibTorch here. The schema is documented in docs/store.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/common/labels.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/store/phases.hpp"
#include "runner/store/run_status.hpp"

struct sqlite3;

namespace runner::store {

namespace detail {
/// Closes a connection (sqlite3_close_v2); defined in the private SQLite layer.
struct ConnectionCloser {
  void operator()(sqlite3* db) const noexcept;
};
/// An open SQLite connection, closed when destroyed.
using Connection = std::unique_ptr<sqlite3, ConnectionCloser>;
/// The test-only way in (runner/store/testing.hpp).
struct StoreAccess;
}  // namespace detail

/// Schema version this build writes (PRAGMA user_version).
inline constexpr int kSchemaVersion = 12;

/// A run whose status is "running" but whose heartbeat_at is older than this
/// is shown as "interrupted" by every reader (the views, list_runs, get_run,
/// runs_of_trial): its process died without writing a verdict. Writers must
/// call heartbeat() well within this (every 10 s or so). The value is also
/// written into the views of schema version 2; changing it needs a migration.
inline constexpr int kStaleHeartbeatSeconds = 60;

/// A run about to start.
struct RunStart {
  std::int64_t trial_id = 0;
  std::int64_t fingerprint_id = 0;
  std::int64_t repeat_index = 0;   ///< 0-based repetition of the trial
  RunKind kind = RunKind::train;
  std::int64_t seed = 0;
  std::int64_t rank = 0;
  double load_average = 0.0;       ///< 1-minute load at start (volatile, so not in the fingerprint)
  std::int64_t pid = 0;            ///< process that records the run; 0: the calling process
  // What identifies that process beyond its pid (empty / 0: unknown), for liveness.
  std::string host;                ///< its hostname
  std::string boot_id;             ///< the boot it runs in (/proc/sys/kernel/random/boot_id)
  std::int64_t pid_start = 0;      ///< its start time, clock ticks after boot (/proc/PID/stat)
  /// Free KEY=VALUE pairs written with the run (run_labels); not its identity.
  Labels labels;
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
  PhaseTimes phase_ns = no_phase_times();  ///< per phase (see phases.hpp); -1: does not apply
  double loss = std::numeric_limits<double>::quiet_NaN();  ///< NaN: none
  // What the training recipe did at this step (NaN / -1: does not apply).
  double lr = std::numeric_limits<double>::quiet_NaN();          ///< first parameter group's lr
  double grad_norm = std::numeric_limits<double>::quiet_NaN();   ///< global L2 norm before clipping
  double loss_scale = std::numeric_limits<double>::quiet_NaN();  ///< amp_fp16: the scale this step used
  int skipped = -1;  ///< amp_fp16: 1 when a non-finite gradient skipped the optimizer step, else 0
  // A data-parallel run: this step's wall time on the slowest rank and the
  // median over the ranks (-1: not a data-parallel step, or a rank did not report).
  double rank_max_ns = -1;
  double rank_median_ns = -1;
  /// true for steps run under the profiler ([profile] steps, after the
  /// warm-up): recorded, but excluded from every statistic as warm-up is
  /// (last, so that aggregate initialisers of the fields above still work)
  bool profiled = false;

  /// True for a step the statistics count: neither warm-up nor profiled.
  [[nodiscard]] bool measured() const { return !warmup && !profiled; }
  /// The duration of one phase, ns (-1: does not apply).
  [[nodiscard]] double& phase(Phase p) { return phase_ns[phase_index(p)]; }
  /// The duration of one phase, ns (-1: does not apply).
  [[nodiscard]] double phase(Phase p) const { return phase_ns[phase_index(p)]; }
};

/// Distribution statistics of one metric over the measured steps of a run.
struct Summary {
  std::string metric;   ///< "step_time", "forward", "latency", ...
  std::string unit;     ///< "ns", ...
  std::int64_t n = 0;
  double mean = 0, stddev = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  double p5 = 0, p95 = 0;
  double cv = 0;        ///< coefficient of variation: stddev / mean
};

/// A scalar result of a run (samples_per_s, final_loss, ...).
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;
};

/// One value of one held-out evaluation of a run.
struct Evaluation {
  std::int64_t step = 0;   ///< optimizer steps done when it was taken (warm-up included)
  std::string metric;      ///< "loss", "accuracy", "perplexity", ...
  double value = 0;        ///< NaN is stored as NULL and read back as NaN
};

/// A weights file a run read or wrote.
struct RunFile {
  /// "init_from" (read at start), "save_to" (written at the end),
  /// "check_against" (the reference outputs), "model.OPTION" (a file a
  /// model plugin's option names, e.g. "model.package") or
  /// "profile_trace" (the Chrome-trace JSON of the profiled steps)
  std::string role;
  std::string path;        ///< absolute path
  std::string sha256;      ///< lowercase hex of the file's bytes
  std::int64_t bytes = 0;  ///< its size
  /// init_from with strict = false: the names the load skipped, one per
  /// line ("missing NAME", "unexpected NAME"); empty otherwise.
  std::string skipped;
};

/// One operator of a profiled run ([profile] steps): its calls and times
/// over the profiled steps, aggregated by name (and by input shapes when
/// they were recorded). See docs/profiling.md for how self time is computed.
struct OpStat {
  std::string name;               ///< "aten::addmm", ...
  std::string input_shapes;       ///< "[[64, 784], [784, 256]]" when recorded; else empty
  std::int64_t calls = 0;
  std::int64_t self_cpu_ns = 0;   ///< total minus the time of directly nested CPU ops
  std::int64_t total_cpu_ns = 0;
  std::int64_t self_cuda_ns = 0;  ///< 0 on the CPU
  std::int64_t total_cuda_ns = 0;
};

/// A fact about what a run ran, as text: the provenance of an exported
/// model (the torch version that made it, its device, dynamic dimensions),
/// recorded as "model.torch_version" = "2.14.1+cu130" and the like.
struct RunAttribute {
  std::string name;   ///< dotted, non-empty, unique within the run
  std::string value;
};

/// A row of `runner runs`.
struct RunRow {
  std::int64_t id = 0;
  std::string experiment;
  std::int64_t trial_id = 0;
  std::int64_t repeat_index = 0;
  RunKind kind = RunKind::train;
  RunStatus status = RunStatus::running;         ///< effective: interrupted for a stale running run
  RunStatus stored_status = RunStatus::running;  ///< runs.status as written
  std::string label;           ///< the trial's sweep label ("optimizer.lr=0.1"); may be empty
  std::string started_at;      ///< ISO-8601 UTC
  std::string finished_at;     ///< empty while running
  std::optional<double> headline;  ///< p50 of step_time (train) or latency (infer), ns
};

/// Everything about one run, for `runner show`.
struct RunDetail {
  RunRow row;
  std::string error;               ///< error text of a failed run
  std::int64_t experiment_id = 0;
  std::string config_json;         ///< the trial's resolved configuration
  std::string config_hash;
  std::string identity;            ///< the trial's identity (config hash + plugin hashes)
  std::string uuid;                ///< the run's stable identity across databases
  std::string heartbeat_at;        ///< ISO-8601 UTC
  std::optional<std::int64_t> pid; ///< process that recorded the run, if known
  std::optional<int> signal;       ///< signal that ended the run, if any
  std::string fingerprint_json;
  std::string fingerprint_hash;
  double load_average = 0;
  std::int64_t seed = 0;
  std::int64_t rank = 0;
  std::vector<PluginRecord> plugins;
  std::vector<Summary> summaries;
  std::vector<Metric> metrics;
  std::vector<Evaluation> evaluations;  ///< by step, then metric
  std::vector<RunFile> files;           ///< files read or written, by role
  std::vector<RunAttribute> attributes; ///< by name
  std::int64_t sample_count = 0;
  Labels labels;                        ///< the run's labels (run_labels), by key
};

/// One run of a trial, for resume decisions.
struct TrialRun {
  std::int64_t run_id = 0;
  std::int64_t repeat_index = 0;
  std::int64_t rank = 0;
  RunStatus status = RunStatus::running;         ///< effective (see kStaleHeartbeatSeconds)
  RunStatus stored_status = RunStatus::running;  ///< runs.status as written
};

/// A trial as `runner compare` selects it.
struct TrialInfo {
  std::int64_t id = 0;
  std::string config_json;
  std::string label;
  std::string identity;
};

/// An experiment file as recorded: where it was read from and its text.
struct StoredSource {
  std::string path;  ///< as given to `run` ("" if not recorded)
  std::string text;  ///< its full text
};

/// A trial row of some experiment that shares an identity (trials_of_identity).
struct IdentityTrial {
  std::int64_t id = 0;          ///< the trial's row (`trial:N`)
  std::string experiment;       ///< its experiment's name
  std::int64_t runs = 0;        ///< the runs recorded under this row
};

/// A run whose stored status is "running", with what identifies its process.
struct RunningRun {
  std::int64_t run_id = 0;
  std::int64_t pid = 0;        ///< 0: unknown
  std::string hostname;        ///< recorded with the run, else from its fingerprint; empty: unknown
  std::string boot_id;         ///< empty: unknown (runs recorded before schema 4)
  std::int64_t pid_start = 0;  ///< 0: unknown
};

/// Rows of one table handled by a merge.
struct TableCounts {
  std::int64_t added = 0;     ///< copied into the target
  std::int64_t present = 0;   ///< already there (same identity), not copied
};

/// What merge_from did with one input database.
struct MergeCounts {
  TableCounts experiments, trials, fingerprints, runs, run_plugins, samples, summaries, metrics,
      evaluations, run_files, run_attributes, run_ops, run_labels;
  /// Runs still "running" in the input with a live heartbeat: not copied
  /// (their process may still write them); merge again once they are done.
  std::int64_t runs_running = 0;

  MergeCounts& operator+=(const MergeCounts& other);
};

/// An open store. Not thread-safe; one per thread. Text read from the file
/// that is not a known run status or kind (another client may write
/// anything) is a runner::Error naming the database and the value.
class Store {
 public:
  /// Opens (creating the file if absent) and migrates to kSchemaVersion.
  /// Throws runner::Error (input kind) if the file cannot be opened or
  /// written, or was written by a newer schema version.
  static Store open(const std::filesystem::path& path);
  /// Opens an existing store read-only (no creation; the file is never
  /// modified). A file at an older schema version is read through a migrated
  /// temporary copy. Throws runner::Error if absent, not a runner database,
  /// or newer than kSchemaVersion.
  static Store open_read_only(const std::filesystem::path& path);
  /// As open_read_only(), but nothing (no error) for a file that is absent
  /// or holds nothing yet: a runner started beside this one may have just
  /// created it and not yet written its schema.
  static std::optional<Store> open_read_only_if_recorded(const std::filesystem::path& path);
  /// Throws runner::Error (input kind, naming the path and the OS reason) if
  /// `path` cannot be created or written; creates nothing.
  static void check_writable(const std::filesystem::path& path);


  /// The schema version found in the file.
  [[nodiscard]] int schema_version() const;

  /// Finds or inserts the experiment (identity: name + SHA-256 of source text); returns its id.
  std::int64_t upsert_experiment(const std::string& name, const std::string& source_path,
                                 const std::string& source_text);
  /// Finds or inserts the trial (identity: experiment + `identity`, the hash
  /// of the config hash and the plugin library hashes); returns its id.
  /// `label` names the sweep point ("optimizer.lr=0.1"; empty: none); the
  /// first non-empty label written is kept. Throws if the identity is
  /// already stored with another configuration or config hash.
  /// `environment` is the canonical JSON of the environment fields in the
  /// identity (empty: none recorded); the first one written is kept.
  std::int64_t upsert_trial(std::int64_t experiment_id, const std::string& config_json,
                            const std::string& config_hash, const std::string& identity,
                            const std::string& label, const std::string& environment = {});
  /// Finds or inserts the fingerprint (identity: hash); returns its id.
  std::int64_t upsert_fingerprint(const std::string& hash, const std::string& json);

  /// The experiment with this name and source text, if stored (no write).
  [[nodiscard]] std::optional<std::int64_t> find_experiment(const std::string& name,
                                                            const std::string& source_text) const;
  /// The trial with this identity in the experiment, if stored (no write).
  [[nodiscard]] std::optional<std::int64_t> find_trial(std::int64_t experiment_id,
                                                       const std::string& identity) const;

  /// Inserts a run with status "running", started_at = heartbeat_at = now,
  /// the process id, a fresh random uuid and its labels. Throws
  /// runner::Error (run) for labels that break the rules of labels.hpp.
  std::int64_t begin_run(const RunStart& start);
  /// Decides, from every run recorded for a trial identity, whether one more
  /// should run (resume policy); called inside claim_run's transaction.
  using ClaimDecision = std::function<bool(const std::vector<TrialRun>& existing)>;
  /// Claims repetition `start.repeat_index` of the trial with `identity` and
  /// inserts its run as "running", atomically: in one write transaction that
  /// first finishes stale claims of that repetition as interrupted, then asks
  /// `decide` (with the effective statuses of every run of the identity that
  /// carries the run's labels, runs_of_identity()), and
  /// inserts only if it says so and no live claim exists (a unique index
  /// enforces it, whatever other processes do). Returns the run id, or
  /// nothing when the repetition is not to run or another runner holds it.
  std::optional<std::int64_t> claim_run(const RunStart& start, const std::string& identity,
                                        const ClaimDecision& decide);
  /// Records the plugin libraries the run loaded.
  void add_plugins(std::int64_t run_id, const std::vector<PluginRecord>& plugins);
  /// Appends samples in one transaction.
  void add_samples(std::int64_t run_id, const std::vector<Sample>& samples);
  /// Updates heartbeat_at = now.
  void heartbeat(std::int64_t run_id);
  /// Sets the final status (not running), error text, finished_at, the
  /// signal that ended the run (0: none), and writes summaries, metrics,
  /// held-out evaluations, the files read or written and the profiled
  /// operators (run_ops), all in one transaction. Throws if the run already has a final status (also when
  /// mark_stale_runs_interrupted() converted it meanwhile), and for two
  /// evaluations with the same step and metric or two files with the same
  /// role or two attributes with the same name; nothing is written then and
  /// the run stays running.
  void finish_run(std::int64_t run_id, RunStatus status, const std::string& error,
                  const std::vector<Summary>& summaries, const std::vector<Metric>& metrics,
                  int signal = 0, const std::vector<Evaluation>& evaluations = {},
                  const std::vector<RunFile>& files = {},
                  const std::vector<RunAttribute>& attributes = {},
                  const std::vector<OpStat>& ops = {});
  /// Finishes a running run as "interrupted" with `error`, for the Ctrl-C
  /// path (call it from normal code after the signal, never from a handler).
  /// Returns false, changing nothing, if the run already has a final status;
  /// throws if there is no such run.
  bool mark_interrupted(std::int64_t run_id, const std::string& error);
  /// Converts every stale "running" run (see kStaleHeartbeatSeconds) into
  /// "interrupted" with finished_at = heartbeat_at and an error saying so, so
  /// that resume reruns it. Returns how many runs it converted.
  std::int64_t mark_stale_runs_interrupted();

  /// Most recent runs first.
  [[nodiscard]] std::vector<RunRow> list_runs(std::int64_t limit = 50) const;
  /// How many runs the store holds (what list_runs() without a limit lists).
  [[nodiscard]] std::int64_t count_runs() const;
  /// One run, or nullopt.
  [[nodiscard]] std::optional<RunDetail> get_run(std::int64_t run_id) const;
  /// The profiled operators of a run (run_ops), by self CPU time, then
  /// total CPU time, descending; empty when the run was not profiled.
  [[nodiscard]] std::vector<OpStat> run_ops(std::int64_t run_id) const;
  /// The labels of one run, by key (empty for a run without any, or no such run).
  [[nodiscard]] Labels labels_of_run(std::int64_t run_id) const;
  /// The labels of every run that has any, by run id: one query, for
  /// readers of many runs (history, export).
  [[nodiscard]] std::map<std::int64_t, Labels> labels_of_runs() const;
  /// Many runs at once, in the order of `run_ids` (ids not stored are left
  /// out): each with its row, configuration hash, identity, fingerprint,
  /// labels, summaries (metric, unit, n, mean, p50) and metrics, and nothing
  /// else; one query per table (runner history reads thousands of runs).
  [[nodiscard]] std::vector<RunDetail> get_runs_brief(const std::vector<std::int64_t>& run_ids) const;
  /// The ids of the runs labelled KEY=VALUE, ascending.
  [[nodiscard]] std::vector<std::int64_t> runs_with_label(const std::string& key,
                                                          const std::string& value) const;
  /// The samples of a run, in step order.
  [[nodiscard]] std::vector<Sample> samples(std::int64_t run_id) const;
  /// Every run of a trial: its own and, for each repetition it has no run
  /// of, those of a trial of the same identity in another experiment (one
  /// configuration's runs are shared), by repeat_index, then rank, then id
  /// (effective statuses).
  [[nodiscard]] std::vector<TrialRun> runs_of_trial(std::int64_t trial_id) const;
  /// Every run of every trial with this identity, in any experiment (resume
  /// matches a trial by what it runs, not by which file row recorded it);
  /// with `labels`, only the runs that carry each of them (a run at another
  /// commit is not this commit's repetition).
  [[nodiscard]] std::vector<TrialRun> runs_of_identity(const std::string& identity,
                                                       const Labels& labels = {}) const;
  /// The recorded trials with this configuration hash that have runs (any
  /// experiment), newest first: their identity and environment JSON (empty
  /// when recorded before schema 8). For "what changed since the recorded runs".
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> environments_of_config(
      const std::string& config_hash) const;
  /// Every trial row with this identity, whatever its experiment, oldest
  /// first, with how many runs each holds: the experiments that share a
  /// configuration's runs (a file recorded under another name runs none of its own).
  [[nodiscard]] std::vector<IdentityTrial> trials_of_identity(const std::string& identity) const;
  /// Every trial of every experiment row named `name`, oldest first.
  [[nodiscard]] std::vector<TrialInfo> trials_of_experiment(const std::string& name) const;
  /// The files recorded under experiment name `name` (one per distinct text), newest first.
  [[nodiscard]] std::vector<StoredSource> experiment_sources(const std::string& name) const;
  /// Runs whose stored status is "running" (their process may be alive or gone).
  [[nodiscard]] std::vector<RunningRun> running_runs() const;
  /// The peak FLOP/s measured on this fingerprint for a device and dtype, if any.
  [[nodiscard]] std::optional<double> peak_flop_per_s(std::int64_t fingerprint_id,
                                                      const std::string& device,
                                                      const std::string& dtype) const;
  /// Records a measured peak FLOP/s (how: `method`, e.g. "matmul 2048^3 fp32").
  void set_peak_flop_per_s(std::int64_t fingerprint_id, const std::string& device,
                           const std::string& dtype, double flop_per_s, const std::string& method);
  /// The copy bandwidth (bytes/s) measured on this fingerprint for a device, if any.
  [[nodiscard]] std::optional<double> peak_bytes_per_s(std::int64_t fingerprint_id,
                                                       const std::string& device) const;
  /// Records a measured copy bandwidth (how: `method`).
  void set_peak_bytes_per_s(std::int64_t fingerprint_id, const std::string& device,
                            double bytes_per_s, const std::string& method);
  /// Sets the fingerprint of a run (the run's own process collects it).
  void set_run_fingerprint(std::int64_t run_id, std::int64_t fingerprint_id);

  /// Copies another runner database into this one in one transaction:
  /// experiments, trials and fingerprints are matched by identity (name +
  /// source SHA-256; experiment + trial identity; hash) and not duplicated;
  /// runs are matched by uuid, and a run already present is skipped with its
  /// plugins, samples, summaries, metrics, evaluations and files; new runs
  /// get new ids. The input
  /// is opened read-only and never modified; an input at an older schema
  /// version is merged from a migrated temporary copy. A stale "running" run
  /// is copied as "interrupted"; a live one is not copied (runs_running).
  /// Throws runner::Error (input) for a missing, foreign or newer input,
  /// for this database itself, and for an identity stored with different
  /// contents on both sides; nothing is written then.
  MergeCounts merge_from(const std::filesystem::path& other);
  /// Merges several inputs in one transaction: all or nothing. One result per input.
  std::vector<MergeCounts> merge_from(const std::vector<std::filesystem::path>& others);

 private:
  friend struct detail::StoreAccess;
  Store(detail::Connection db, std::filesystem::path path);

  detail::Connection db_;
  std::filesystem::path path_;  ///< as opened, for messages
};

}  // namespace runner::store
