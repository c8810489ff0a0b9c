// Merging: another runner database copied into this one in one
// transaction, matched by identity (experiments, trials, fingerprints) and
// by uuid (runs). See docs/store.md, "Merging databases".
#include <sys/stat.h>

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "schema.hpp"

namespace runner::store {

using detail::Connection;
using detail::exec;
using detail::file_of;
using detail::open_checked_read_only;
using detail::open_current_read_only;
using detail::quoted;
using detail::Statement;
using detail::Transaction;
using detail::with_context;

MergeCounts& MergeCounts::operator+=(const MergeCounts& other) {
  for (auto [mine, theirs] :
       {std::pair{&experiments, &other.experiments}, std::pair{&trials, &other.trials},
        std::pair{&fingerprints, &other.fingerprints}, std::pair{&runs, &other.runs},
        std::pair{&run_plugins, &other.run_plugins}, std::pair{&samples, &other.samples},
        std::pair{&summaries, &other.summaries}, std::pair{&metrics, &other.metrics},
        std::pair{&evaluations, &other.evaluations}, std::pair{&run_files, &other.run_files},
        std::pair{&run_attributes, &other.run_attributes}, std::pair{&run_ops, &other.run_ops},
        std::pair{&run_labels, &other.run_labels}}) {
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
    children("samples", detail::sample_columns(), counts_.samples);
    children("summaries",
             {"metric", "unit", "n", "mean", "stddev", "min", "p50", "p90", "p99", "max", "p5", "p95",
              "cv"},
             counts_.summaries);
    children("metrics", {"name", "value", "unit"}, counts_.metrics);
    children("evaluations", {"step", "metric", "value"}, counts_.evaluations);
    children("run_files", {"role", "path", "sha256", "bytes", "skipped"}, counts_.run_files);
    children("run_attributes", {"name", "value"}, counts_.run_attributes);
    children("run_ops",
             {"name", "input_shapes", "calls", "self_cpu_ns", "total_cpu_ns", "self_cuda_ns",
              "total_cuda_ns"},
             counts_.run_ops);
    children("run_labels", {"name", "value"}, counts_.run_labels);
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
                   "t.identity, t.label, coalesce(e.name, ''), t.environment FROM trials AS t "
                   "LEFT JOIN experiments AS e ON e.id = t.experiment_id ORDER BY t.id");
    Statement find(dst_,
                   "SELECT id, config_json, config_hash FROM trials "
                   "WHERE experiment_id = ?1 AND identity = ?2");
    Statement insert(dst_,
                     "INSERT INTO trials (experiment_id, config_json, config_hash, created_at, "
                     "identity, label, environment) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
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
      insert.bind_column(7, read, 8);
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
                   "heartbeat_at, pid, signal, uuid, claim, host, boot_id, pid_start "
                   "FROM runs ORDER BY id");
    Statement find(dst_, "SELECT id FROM runs WHERE uuid = ?1");
    Statement insert(dst_,
                     "INSERT INTO runs (trial_id, fingerprint_id, repeat_index, kind, status, "
                     "error, seed, rank, load_average, started_at, finished_at, heartbeat_at, pid, "
                     "signal, uuid, claim, host, boot_id, pid_start) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                     "?16, ?17, ?18, ?19)");
    while (read.step()) {
      const std::int64_t id = read.int64(0);
      if (read.text(5) == to_string(RunStatus::running)) {
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
      for (int c = 3; c <= 19; ++c) insert.bind_column(c, read, c);
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
  const std::filesystem::path target = file_of(db_.get());
  // Every input is checked before anything is written, so that a bad one
  // named last does not leave the others half-merged. They are opened again
  // one at a time below, so that a thousand shards do not need a thousand
  // open files.
  for (const auto& other : others) {
    if (!target.empty() && same_file(target, other))
      throw Error("cannot merge database " + quoted(other) + " into itself",
                  "merge into another file");
    int version = 0;
    static_cast<void>(open_checked_read_only(other, version));  // closed again at once
  }
  return with_context("cannot merge into " + quoted(target), [&] {
    std::vector<MergeCounts> counts;
    Transaction tx(db_.get());
    for (const auto& other : others) {
      const Connection source = open_current_read_only(other);
      counts.push_back(Merger(db_.get(), source.get(), other).run());
    }
    tx.commit();
    return counts;
  });
}

}  // namespace runner::store
