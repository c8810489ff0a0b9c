// Writing: experiments, trials and fingerprints by identity; a run from its
// start to its verdict; measured peaks.
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <type_traits>
#include <utility>

#include "runner/common/sha256.hpp"
#include "schema.hpp"

namespace runner::store {

using detail::SqliteError;
using detail::Statement;
using detail::Transaction;
using detail::with_context;

namespace {

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

/// INSERT INTO table (run_id, <columns>) VALUES (?1, ?2, ...).
std::string insert_sql(const std::string& table, const std::vector<std::string>& columns) {
  std::string names = "run_id";
  std::string params = "?1";
  int index = 1;
  for (const std::string& column : columns) {
    names += ", " + column;
    params += ", ?" + std::to_string(++index);
  }
  return "INSERT INTO " + table + " (" + names + ") VALUES (" + params + ")";
}

/// Binds `values` to ?first, ?first + 1, ...: reals, integers and text by their type.
template <typename... Values>
void bind_from(Statement& row, int first, const Values&... values) {
  int index = first;
  const auto bind = [&](const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_floating_point_v<T>) {
      row.bind_real(index++, value);  // NaN -> NULL
    } else if constexpr (std::is_integral_v<T>) {
      row.bind_int(index++, value);
    } else {
      row.bind_text(index++, value);
    }
  };
  (bind(values), ...);
}

/// Inserts one row of `table` per item of `items`, run_id first, with one
/// prepared statement; `bind` binds an item's `columns` from ?2 on.
template <typename T, typename Bind>
void insert_rows(sqlite3* db, std::int64_t run_id, const std::string& table,
                 const std::vector<std::string>& columns, const std::vector<T>& items, Bind bind) {
  Statement row(db, insert_sql(table, columns));
  for (const T& item : items) {
    row.reset();
    row.bind_int(1, run_id);
    bind(row, item);
    row.run();
  }
}

}  // namespace

std::int64_t Store::upsert_experiment(const std::string& name, const std::string& source_path,
                                      const std::string& source_text) {
  return with_context("cannot record experiment '" + name + "'", [&] {
    const std::string sha = sha256_hex(source_text);
    Statement insert(db_.get(),
                     "INSERT INTO experiments (name, source_path, source_text, source_sha256) "
                     "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name, source_sha256) DO NOTHING");
    insert.bind_text(1, name);
    insert.bind_text_or_null(2, source_path);
    insert.bind_text_or_null(3, source_text);
    insert.bind_text(4, sha);
    insert.run();
    Statement find(db_.get(), "SELECT id FROM experiments WHERE name = ?1 AND source_sha256 = ?2");
    find.bind_text(1, name);
    find.bind_text(2, sha);
    if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "row vanished after insert");
    return find.int64(0);
  });
}

std::int64_t Store::upsert_trial(std::int64_t experiment_id, const std::string& config_json,
                                 const std::string& config_hash, const std::string& identity,
                                 const std::string& label, const std::string& environment) {
  return with_context("cannot record trial " + identity, [&] {
    // A label is descriptive, not identity: the same configuration reached
    // under another label is the same trial. The first label written stays,
    // but a trial recorded without one gets one.
    Statement insert(db_.get(),
                     "INSERT INTO trials (experiment_id, config_json, config_hash, identity, label, "
                     "environment) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                     "ON CONFLICT (experiment_id, identity) DO UPDATE SET "
                     "label = coalesce(trials.label, excluded.label), "
                     "environment = coalesce(trials.environment, excluded.environment)");
    insert.bind_int(1, experiment_id);
    insert.bind_text(2, config_json);
    insert.bind_text(3, config_hash);
    insert.bind_text(4, identity);
    insert.bind_text_or_null(5, label);
    insert.bind_text_or_null(6, environment);
    insert.run();
    Statement find(db_.get(),
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

std::int64_t Store::upsert_fingerprint(const std::string& hash, const std::string& json) {
  return with_context("cannot record fingerprint " + hash, [&] {
    Statement insert(db_.get(),
                     "INSERT INTO fingerprints (hash, json) VALUES (?1, ?2) "
                     "ON CONFLICT (hash) DO NOTHING");
    insert.bind_text(1, hash);
    insert.bind_text(2, json);
    insert.run();
    Statement find(db_.get(), "SELECT id, json FROM fingerprints WHERE hash = ?1");
    find.bind_text(1, hash);
    if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "row vanished after insert");
    if (find.text(1) != json)
      throw Error("fingerprint " + hash + " is already stored with different contents", {},
                  ErrorKind::run);
    return find.int64(0);
  });
}

namespace {

// Labels are checked before the transaction: a bad one changes nothing and
// says why, rather than leaving a run without the labels it was asked to carry.
void check_labels(const Labels& labels) {
  if (const std::string problem = labels_problem(labels); !problem.empty())
    throw Error("cannot record a run: " + problem, {}, ErrorKind::run);
}

/// Inserts a run with status "running" and its labels; `claim` is NULL for
/// a run that claims nothing (begin_run).
std::int64_t insert_run(sqlite3* db, const RunStart& start, const std::string& claim) {
  Statement insert(db,
                   "INSERT INTO runs (trial_id, fingerprint_id, repeat_index, kind, status, "
                   "seed, rank, load_average, pid, uuid, claim, host, boot_id, pid_start) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  insert.bind_int(1, start.trial_id);
  // 0 means "not fingerprinted"; a run is still worth recording without one.
  if (start.fingerprint_id > 0) {
    insert.bind_int(2, start.fingerprint_id);
  } else {
    insert.bind_null(2);
  }
  insert.bind_int(3, start.repeat_index);
  insert.bind_text(4, to_string(start.kind));
  insert.bind_text(5, to_string(RunStatus::running));
  insert.bind_int(6, start.seed);
  insert.bind_int(7, start.rank);
  insert.bind_real(8, start.load_average);
  insert.bind_int(9, start.pid > 0 ? start.pid : static_cast<std::int64_t>(::getpid()));
  insert.bind_text(10, random_uuid());
  insert.bind_text_or_null(11, claim);
  insert.bind_text_or_null(12, start.host);
  insert.bind_text_or_null(13, start.boot_id);
  if (start.pid_start > 0) {
    insert.bind_int(14, start.pid_start);
  } else {
    insert.bind_null(14);
  }
  insert.run();
  const auto run_id = static_cast<std::int64_t>(sqlite3_last_insert_rowid(db));
  Statement label(db, "INSERT INTO run_labels (run_id, name, value) VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : start.labels) {
    label.reset();
    bind_from(label, 1, run_id, name, value);
    label.run();
  }
  return run_id;
}

}  // namespace

std::int64_t Store::begin_run(const RunStart& start) {
  check_labels(start.labels);
  return with_context("cannot record the start of a run", [&] {
    Transaction tx(db_.get());
    const std::int64_t id = insert_run(db_.get(), start, {});
    tx.commit();
    return id;
  });
}

std::optional<std::int64_t> Store::claim_run(const RunStart& start, const std::string& identity,
                                             const ClaimDecision& decide) {
  const std::string claim = identity + ":" + std::to_string(start.repeat_index) + ":" +
                            std::to_string(start.rank);
  check_labels(start.labels);
  return with_context("cannot claim a run of trial " + identity.substr(0, 12),
                      [&]() -> std::optional<std::int64_t> {
    Transaction tx(db_.get());
    // A stale claim of this repetition (its runner stopped heartbeating) is
    // over: every reader already shows it interrupted.
    Statement stale(db_.get(),
                    "UPDATE runs SET status = 'interrupted', finished_at = heartbeat_at, "
                    "error = coalesce(error, " RUNNER_STALE_ERROR("runs") ") "
                    "WHERE claim = ?1 AND " RUNNER_IS_STALE("runs"));
    stale.bind_text(1, claim);
    stale.run();
    if (!decide(runs_of_identity(identity, start.labels))) {
      tx.commit();
      return std::nullopt;
    }
    std::int64_t id = 0;
    try {
      id = insert_run(db_.get(), start, claim);
    } catch (const SqliteError& e) {
      // Another runner holds a live claim of this repetition (runs_live_claim).
      if (e.primary_code() == SQLITE_CONSTRAINT) return std::nullopt;
      throw;
    }
    tx.commit();
    return id;
  });
}

void Store::add_plugins(std::int64_t run_id, const std::vector<PluginRecord>& plugins) {
  with_context("cannot record the plugins of run " + std::to_string(run_id), [&] {
    Transaction tx(db_.get());
    insert_rows(db_.get(), run_id, "run_plugins", {"kind", "name", "library", "version", "sha256"},
                plugins, [](Statement& row, const PluginRecord& p) {
                  bind_from(row, 2, p.kind, p.name, p.library, p.version, p.sha256);
                });
    tx.commit();
  });
}

void Store::add_samples(std::int64_t run_id, const std::vector<Sample>& samples) {
  with_context("cannot record the samples of run " + std::to_string(run_id), [&] {
    Transaction tx(db_.get());
    // Binds follow sample_columns(), after run_id.
    insert_rows(db_.get(), run_id, "samples", detail::sample_columns(), samples,
                [](Statement& row, const Sample& sample) {
                  row.bind_int(2, sample.step);
                  row.bind_int(3, sample.warmup ? 1 : 0);
                  row.bind_duration(4, sample.wall_ns);
                  row.bind_real(5, sample.loss);  // NaN -> NULL
                  for (std::size_t p = 0; p < kPhaseCount; ++p)
                    row.bind_duration(detail::kFirstPhaseColumn + 2 + static_cast<int>(p),
                                      sample.phase_ns[p]);
                  constexpr int recipe = detail::kFirstRecipeColumn + 2;
                  row.bind_real(recipe, sample.lr);
                  row.bind_real(recipe + 1, sample.grad_norm);
                  row.bind_real(recipe + 2, sample.loss_scale);
                  if (sample.skipped < 0) {
                    row.bind_null(recipe + 3);
                  } else {
                    row.bind_int(recipe + 3, sample.skipped != 0 ? 1 : 0);
                  }
                  row.bind_duration(recipe + 4, sample.rank_max_ns);
                  row.bind_duration(recipe + 5, sample.rank_median_ns);
                  row.bind_int(recipe + 6, sample.profiled ? 1 : 0);
                });
    tx.commit();
  });
}

void Store::heartbeat(std::int64_t run_id) {
  with_context("cannot update the heartbeat of run " + std::to_string(run_id), [&] {
    Statement update(db_.get(),
                     "UPDATE runs SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
                     "WHERE id = ?1");
    update.bind_int(1, run_id);
    update.run();
    if (sqlite3_changes(db_.get()) == 0) throw SqliteError(SQLITE_NOTFOUND, "no such run");
  });
}

namespace {

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

/// Checks what finish_run is given beyond the verdict before anything is
/// written: a repeated (step, metric) or role would otherwise be a bare
/// constraint failure, or, worse, one value silently standing for two.
void check_evaluations_and_files(const std::string& doing,
                                 const std::vector<Evaluation>& evaluations,
                                 const std::vector<RunFile>& files) {
  std::set<std::pair<std::int64_t, std::string>> seen;
  for (const Evaluation& e : evaluations) {
    const std::string what = "evaluation '" + e.metric + "' at step " + std::to_string(e.step);
    if (e.metric.empty())
      throw Error(doing + ": evaluation at step " + std::to_string(e.step) +
                      " has no metric name",
                  {}, ErrorKind::run);
    if (e.step < 0)
      throw Error(doing + ": " + what + ": invalid step (expected 0 or more)", {},
                  ErrorKind::run);
    if (!seen.emplace(e.step, e.metric).second)
      throw Error(doing + ": " + what +
                      " is given twice (each metric is recorded once per evaluation step)",
                  {}, ErrorKind::run);
  }
  std::map<std::string, std::string> paths;  // by role
  for (const RunFile& f : files) {
    const std::string what = "weights file '" + f.path + "' (" + f.role + ")";
    if (f.role.empty())
      throw Error(doing + ": weights file '" + f.path + "' has no role", {}, ErrorKind::run);
    if (const auto [it, added] = paths.emplace(f.role, f.path); !added)
      throw Error(doing + ": weights file role '" + f.role + "' is given twice ('" + it->second +
                      "', then '" + f.path + "'; a run has one file per role)",
                  {}, ErrorKind::run);
    if (f.path.empty() || f.path.front() != '/')
      throw Error(doing + ": " + what + ": expected an absolute path", {}, ErrorKind::run);
    if (!is_sha256_hex(f.sha256))
      throw Error(doing + ": " + what + ": invalid sha256 '" + f.sha256 +
                      "' (expected 64 lowercase hex digits)",
                  {}, ErrorKind::run);
    if (f.bytes < 0)
      throw Error(doing + ": " + what + ": invalid size " + std::to_string(f.bytes) +
                      " (expected 0 or more bytes)",
                  {}, ErrorKind::run);
  }
}

// Attribute names must be non-empty and unique: checked before the
// transaction, so that a bad set changes nothing and says why.
void check_attributes(const std::string& doing, const std::vector<RunAttribute>& attributes) {
  std::set<std::string> names;
  for (const RunAttribute& a : attributes) {
    if (a.name.empty())
      throw Error(doing + ": an attribute has an empty name", {}, ErrorKind::run);
    if (!names.insert(a.name).second)
      throw Error(doing + ": two attributes named '" + a.name + "'", {}, ErrorKind::run);
  }
}

// Operators: a name, unique with its input shapes, and counts that add up.
void check_ops(const std::string& doing, const std::vector<OpStat>& ops) {
  std::set<std::pair<std::string, std::string>> keys;
  for (const OpStat& op : ops) {
    if (op.name.empty()) throw Error(doing + ": an operator has an empty name", {}, ErrorKind::run);
    if (!keys.emplace(op.name, op.input_shapes).second)
      throw Error(doing + ": operator '" + op.name + "' is given twice with input shapes '" +
                      op.input_shapes + "'",
                  {}, ErrorKind::run);
    if (op.calls < 1 || op.self_cpu_ns < 0 || op.total_cpu_ns < op.self_cpu_ns ||
        op.self_cuda_ns < 0 || op.total_cuda_ns < op.self_cuda_ns)
      throw Error(doing + ": operator '" + op.name +
                      "': expected calls >= 1 and 0 <= self <= total times",
                  {}, ErrorKind::run);
  }
}

}  // namespace

void Store::finish_run(std::int64_t run_id, RunStatus status, const std::string& error,
                       const std::vector<Summary>& summaries, const std::vector<Metric>& metrics,
                       int signal, const std::vector<Evaluation>& evaluations,
                       const std::vector<RunFile>& files,
                       const std::vector<RunAttribute>& attributes,
                       const std::vector<OpStat>& ops) {
  const std::string doing = "cannot finish run " + std::to_string(run_id);
  if (status == RunStatus::running) {
    throw Error(doing +
                    ": invalid status 'running' (expected finished, failed, crashed, timeout, "
                    "interrupted or diverged)",
                {}, ErrorKind::run);
  }
  if (signal < 0 || (signal > 0 && status == RunStatus::finished)) {
    throw Error(doing + ": invalid signal " + std::to_string(signal) + " for status '" +
                    to_string(status) +
                    "' (expected 0, or a positive signal number for a run that did not finish)",
                {}, ErrorKind::run);
  }
  check_evaluations_and_files(doing, evaluations, files);
  check_attributes(doing, attributes);
  check_ops(doing, ops);
  with_context(doing, [&] {
    Transaction tx(db_.get());
    {
      Statement current(db_.get(), "SELECT status FROM runs WHERE id = ?1");
      current.bind_int(1, run_id);
      if (!current.step()) throw SqliteError(SQLITE_NOTFOUND, "no such run");
      // A second verdict would overwrite the first (e.g. a timeout racing a
      // clean finish); the first one written is the one that happened.
      if (current.text(0) != to_string(RunStatus::running))
        throw SqliteError(SQLITE_CONSTRAINT, "it already has status '" + current.text(0) + "'");
    }
    Statement update(db_.get(),
                     "UPDATE runs SET status = ?2, error = ?3, signal = ?4, "
                     "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                     "heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?1");
    update.bind_int(1, run_id);
    update.bind_text(2, to_string(status));
    update.bind_text_or_null(3, error);
    if (signal > 0) {
      update.bind_int(4, signal);
    } else {
      update.bind_null(4);
    }
    update.run();

    insert_rows(db_.get(), run_id, "summaries",
                {"metric", "unit", "n", "mean", "stddev", "min", "p50", "p90", "p99", "max", "p5",
                 "p95", "cv"},
                summaries, [](Statement& row, const Summary& s) {
                  bind_from(row, 2, s.metric, s.unit, s.n, s.mean, s.stddev, s.min, s.p50, s.p90,
                            s.p99, s.max, s.p5, s.p95, s.cv);
                });
    insert_rows(db_.get(), run_id, "metrics", {"name", "value", "unit"}, metrics,
                [](Statement& row, const Metric& m) {
                  bind_from(row, 2, m.name, m.value, m.unit);
                });
    insert_rows(db_.get(), run_id, "evaluations", {"step", "metric", "value"}, evaluations,
                [](Statement& row, const Evaluation& e) {
                  bind_from(row, 2, e.step, e.metric, e.value);  // a NaN value -> NULL
                });
    insert_rows(db_.get(), run_id, "run_files", {"role", "path", "sha256", "bytes", "skipped"},
                files, [](Statement& row, const RunFile& f) {
                  bind_from(row, 2, f.role, f.path, f.sha256, f.bytes, f.skipped);
                });
    insert_rows(db_.get(), run_id, "run_attributes", {"name", "value"}, attributes,
                [](Statement& row, const RunAttribute& a) { bind_from(row, 2, a.name, a.value); });
    insert_rows(db_.get(), run_id, "run_ops",
                {"name", "input_shapes", "calls", "self_cpu_ns", "total_cpu_ns", "self_cuda_ns",
                 "total_cuda_ns"},
                ops, [](Statement& row, const OpStat& op) {
                  bind_from(row, 2, op.name, op.input_shapes, op.calls, op.self_cpu_ns,
                            op.total_cpu_ns, op.self_cuda_ns, op.total_cuda_ns);
                });
    tx.commit();
  });
}

bool Store::mark_interrupted(std::int64_t run_id, const std::string& error) {
  return with_context("cannot mark run " + std::to_string(run_id) + " interrupted", [&] {
    Transaction tx(db_.get());
    Statement update(db_.get(),
                     "UPDATE runs SET status = 'interrupted', error = ?2, "
                     "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                     "heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
                     "WHERE id = ?1 AND status = 'running'");
    update.bind_int(1, run_id);
    update.bind_text_or_null(2, error);
    update.run();
    const bool changed = sqlite3_changes(db_.get()) > 0;
    if (!changed) {
      Statement exists(db_.get(), "SELECT 1 FROM runs WHERE id = ?1");
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
    Statement update(db_.get(),
                     "UPDATE runs SET status = 'interrupted', finished_at = heartbeat_at, "
                     "error = coalesce(error, " RUNNER_STALE_ERROR("runs") ") "
                     "WHERE " RUNNER_IS_STALE("runs"));
    update.run();
    return static_cast<std::int64_t>(sqlite3_changes(db_.get()));
  });
}

void Store::set_peak_flop_per_s(std::int64_t fingerprint_id, const std::string& device,
                                const std::string& dtype, double flop_per_s,
                                const std::string& method) {
  with_context("cannot record the measured peak", [&] {
    Statement insert(db_.get(),
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

void Store::set_peak_bytes_per_s(std::int64_t fingerprint_id, const std::string& device,
                                 double bytes_per_s, const std::string& method) {
  with_context("cannot record the measured bandwidth", [&] {
    Statement insert(db_.get(),
                     "INSERT OR REPLACE INTO peak_bandwidth (fingerprint_id, device, "
                     "bytes_per_s, method) VALUES (?1, ?2, ?3, ?4)");
    insert.bind_int(1, fingerprint_id);
    insert.bind_text(2, device);
    insert.bind_real(3, bytes_per_s);
    insert.bind_text(4, method);
    insert.run();
  });
}

void Store::set_run_fingerprint(std::int64_t run_id, std::int64_t fingerprint_id) {
  with_context("cannot set the fingerprint of run " + std::to_string(run_id), [&] {
    Statement update(db_.get(), "UPDATE runs SET fingerprint_id = ?2 WHERE id = ?1");
    update.bind_int(1, run_id);
    update.bind_int(2, fingerprint_id);
    update.run();
    if (sqlite3_changes(db_.get()) == 0) throw SqliteError(SQLITE_NOTFOUND, "no such run");
  });
}

}  // namespace runner::store
