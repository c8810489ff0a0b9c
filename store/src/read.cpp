// Reading: the runs as `runner runs` and `runner show` list them, samples,
// what resume and compare select. Statuses and kinds are converted from
// their text here, at the SQL boundary.
#include <limits>
#include <map>

#include "runner/common/sha256.hpp"
#include "schema.hpp"

namespace runner::store {

using detail::Statement;
using detail::with_context;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Shared by list_runs and get_run so that `runner runs` and `runner show`
// agree with the documented view an outside client queries.
constexpr const char* kRunRowColumns =
    "run_id, experiment, trial_id, repeat_index, kind, status, started_at, "
    "coalesce(finished_at, ''), p50_ns, stored_status, coalesce(label, '')";

RunRow read_run_row(const Statement& stmt, const std::filesystem::path& db) {
  RunRow row;
  row.id = stmt.int64(0);
  row.experiment = stmt.text(1);
  row.trial_id = stmt.int64(2);
  row.repeat_index = stmt.int64(3);
  row.kind = detail::kind_from_sql(stmt.text(4), db);
  row.status = detail::status_from_sql(stmt.text(5), db);
  row.started_at = stmt.text(6);
  row.finished_at = stmt.text(7);
  if (!stmt.is_null(8)) row.headline = stmt.real(8, kNaN);
  row.stored_status = detail::status_from_sql(stmt.text(9), db);
  row.label = stmt.text(10);
  return row;
}

// Columns: id, repeat_index, rank, effective status, stored status.
std::vector<TrialRun> read_trial_runs(Statement& query, const std::filesystem::path& db) {
  std::vector<TrialRun> out;
  while (query.step()) {
    TrialRun run;
    run.run_id = query.int64(0);
    run.repeat_index = query.int64(1);
    run.rank = query.int64(2);
    run.status = detail::status_from_sql(query.text(3), db);
    run.stored_status = detail::status_from_sql(query.text(4), db);
    out.push_back(run);
  }
  return out;
}

/// SELECT <sample_columns()> FROM samples WHERE run_id = ?1 ORDER BY step.
std::string select_samples_sql() {
  std::string columns;
  for (const std::string& column : detail::sample_columns())
    columns += (columns.empty() ? "" : ", ") + column;
  return "SELECT " + columns + " FROM samples WHERE run_id = ?1 ORDER BY step";
}

}  // namespace

std::optional<std::int64_t> Store::find_experiment(const std::string& name,
                                                   const std::string& source_text) const {
  return with_context("cannot look up experiment '" + name + "'",
                      [&]() -> std::optional<std::int64_t> {
                        Statement find(db_.get(),
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
    Statement find(db_.get(), "SELECT id FROM trials WHERE experiment_id = ?1 AND identity = ?2");
    find.bind_int(1, experiment_id);
    find.bind_text(2, identity);
    if (!find.step()) return std::nullopt;
    return find.int64(0);
  });
}

std::vector<RunRow> Store::list_runs(std::int64_t limit) const {
  return with_context("cannot list runs", [&] {
    Statement query(db_.get(), std::string("SELECT ") + kRunRowColumns +
                                   " FROM run_overview ORDER BY run_id DESC LIMIT ?1");
    query.bind_int(1, limit);
    std::vector<RunRow> rows;
    while (query.step()) rows.push_back(read_run_row(query, path_));
    return rows;
  });
}

std::int64_t Store::count_runs() const {
  return with_context("cannot count runs", [&] {
    Statement query(db_.get(), "SELECT count(*) FROM run_overview");
    return query.step() ? query.int64(0) : std::int64_t{0};
  });
}

std::optional<RunDetail> Store::get_run(std::int64_t run_id) const {
  return with_context("cannot read run " + std::to_string(run_id), [&]() -> std::optional<RunDetail> {
    RunDetail detail;
    {
      Statement query(db_.get(), std::string("SELECT ") + kRunRowColumns +
                                     " FROM run_overview WHERE run_id = ?1");
      query.bind_int(1, run_id);
      if (!query.step()) return std::nullopt;
      detail.row = read_run_row(query, path_);
    }
    {
      Statement query(db_.get(),
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
      Statement query(db_.get(),
                      "SELECT kind, name, library, version, sha256 FROM run_plugins "
                      "WHERE run_id = ?1 ORDER BY kind, name");
      query.bind_int(1, run_id);
      while (query.step()) {
        detail.plugins.push_back(
            {query.text(0), query.text(1), query.text(2), query.text(3), query.text(4)});
      }
    }
    {
      Statement query(db_.get(),
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
      Statement query(db_.get(),
                      "SELECT name, value, unit FROM metrics WHERE run_id = ?1 ORDER BY name");
      query.bind_int(1, run_id);
      while (query.step())
        detail.metrics.push_back({query.text(0), query.real(1, kNaN), query.text(2)});
    }
    {
      Statement query(db_.get(),
                      "SELECT step, metric, value FROM evaluations WHERE run_id = ?1 "
                      "ORDER BY step, metric");
      query.bind_int(1, run_id);
      while (query.step())
        detail.evaluations.push_back({query.int64(0), query.text(1), query.real(2, kNaN)});
    }
    {
      Statement query(db_.get(),
                      "SELECT role, path, sha256, bytes, skipped FROM run_files WHERE run_id = ?1 "
                      "ORDER BY role");
      query.bind_int(1, run_id);
      while (query.step())
        detail.files.push_back(
            {query.text(0), query.text(1), query.text(2), query.int64(3), query.text(4)});
    }
    {
      Statement query(db_.get(),
                      "SELECT name, value FROM run_attributes WHERE run_id = ?1 ORDER BY name");
      query.bind_int(1, run_id);
      while (query.step()) detail.attributes.push_back({query.text(0), query.text(1)});
    }
    {
      Statement query(db_.get(), "SELECT count(*) FROM samples WHERE run_id = ?1");
      query.bind_int(1, run_id);
      if (query.step()) detail.sample_count = query.int64(0);
    }
    detail.labels = labels_of_run(run_id);
    return detail;
  });
}

Labels Store::labels_of_run(std::int64_t run_id) const {
  return with_context("cannot read the labels of run " + std::to_string(run_id), [&] {
    Statement query(db_.get(), "SELECT name, value FROM run_labels WHERE run_id = ?1");
    query.bind_int(1, run_id);
    Labels out;
    while (query.step()) out.emplace(query.text(0), query.text(1));
    return out;
  });
}

std::map<std::int64_t, Labels> Store::labels_of_runs() const {
  return with_context("cannot read the labels of the runs", [&] {
    Statement query(db_.get(), "SELECT run_id, name, value FROM run_labels");
    std::map<std::int64_t, Labels> out;
    while (query.step()) out[query.int64(0)].emplace(query.text(1), query.text(2));
    return out;
  });
}

std::vector<std::int64_t> Store::runs_with_label(const std::string& key,
                                                 const std::string& value) const {
  return with_context("cannot read the runs labelled " + key + "=" + value, [&] {
    Statement query(db_.get(),
                    "SELECT run_id FROM run_labels WHERE name = ?1 AND value = ?2 ORDER BY run_id");
    query.bind_text(1, key);
    query.bind_text(2, value);
    std::vector<std::int64_t> out;
    while (query.step()) out.push_back(query.int64(0));
    return out;
  });
}

std::vector<Sample> Store::samples(std::int64_t run_id) const {
  return with_context("cannot read the samples of run " + std::to_string(run_id), [&] {
    static const std::string sql = select_samples_sql();
    Statement query(db_.get(), sql);
    query.bind_int(1, run_id);
    std::vector<Sample> out;
    while (query.step()) {
      // Columns follow sample_columns().
      Sample s;
      s.step = query.int64(0);
      s.warmup = query.int64(1) != 0;
      s.wall_ns = query.real(2, -1);
      s.loss = query.real(3, kNaN);
      for (std::size_t p = 0; p < kPhaseCount; ++p)
        s.phase_ns[p] = query.real(detail::kFirstPhaseColumn + static_cast<int>(p), -1);
      constexpr int recipe = detail::kFirstRecipeColumn;
      s.lr = query.real(recipe, kNaN);
      s.grad_norm = query.real(recipe + 1, kNaN);
      s.loss_scale = query.real(recipe + 2, kNaN);
      s.skipped = query.is_null(recipe + 3) ? -1 : static_cast<int>(query.int64(recipe + 3));
      s.rank_max_ns = query.real(recipe + 4, -1);
      s.rank_median_ns = query.real(recipe + 5, -1);
      s.profiled = !query.is_null(recipe + 6) && query.int64(recipe + 6) != 0;
      out.push_back(s);
    }
    return out;
  });
}

std::vector<OpStat> Store::run_ops(std::int64_t run_id) const {
  return with_context("cannot read the operators of run " + std::to_string(run_id), [&] {
    Statement query(db_.get(),
                    "SELECT name, input_shapes, calls, self_cpu_ns, total_cpu_ns, self_cuda_ns, "
                    "total_cuda_ns FROM run_ops WHERE run_id = ?1 "
                    "ORDER BY self_cpu_ns DESC, total_cpu_ns DESC, name, input_shapes");
    query.bind_int(1, run_id);
    std::vector<OpStat> out;
    while (query.step()) {
      OpStat op;
      op.name = query.text(0);
      op.input_shapes = query.text(1);
      op.calls = query.int64(2);
      op.self_cpu_ns = query.int64(3);
      op.total_cpu_ns = query.int64(4);
      op.self_cuda_ns = query.int64(5);
      op.total_cuda_ns = query.int64(6);
      out.push_back(std::move(op));
    }
    return out;
  });
}

std::vector<TrialRun> Store::runs_of_trial(std::int64_t trial_id) const {
  return with_context("cannot read the runs of trial " + std::to_string(trial_id), [&] {
    // A trial of a file that differs from another only in its name runs
    // no repetition the other file's trial has run (the scheduler shares
    // them): those are its runs too. Where it has runs of its own (an A/A
    // pair run with --force), they are its repetitions.
    Statement query(db_.get(),
                    "SELECT runs.id, runs.repeat_index, runs.rank, " RUNNER_EFFECTIVE_STATUS("runs")
                    ", runs.status FROM runs JOIN trials ON trials.id = runs.trial_id "
                    "WHERE runs.trial_id = ?1 OR (trials.identity = (SELECT identity FROM trials "
                    "WHERE id = ?1) AND runs.repeat_index NOT IN (SELECT repeat_index FROM runs "
                    "WHERE trial_id = ?1)) ORDER BY runs.repeat_index, runs.rank, runs.id");
    query.bind_int(1, trial_id);
    return read_trial_runs(query, path_);
  });
}

std::vector<TrialRun> Store::runs_of_identity(const std::string& identity,
                                               const Labels& labels) const {
  return with_context("cannot read the runs of trial " + identity.substr(0, 12), [&] {
    std::string sql =
        "SELECT runs.id, runs.repeat_index, runs.rank, " RUNNER_EFFECTIVE_STATUS("runs")
        ", runs.status FROM runs JOIN trials ON trials.id = runs.trial_id "
        "WHERE trials.identity = ?1";
    int param = 1;
    for (std::size_t i = 0; i < labels.size(); ++i, param += 2)
      sql += " AND EXISTS (SELECT 1 FROM run_labels AS l WHERE l.run_id = runs.id AND l.name = ?" +
             std::to_string(param + 1) + " AND l.value = ?" + std::to_string(param + 2) + ")";
    Statement query(db_.get(), sql + " ORDER BY runs.repeat_index, runs.rank, runs.id");
    query.bind_text(1, identity);
    param = 1;
    for (const auto& [name, value] : labels) {
      query.bind_text(++param, name);
      query.bind_text(++param, value);
    }
    return read_trial_runs(query, path_);
  });
}

std::vector<std::pair<std::string, std::string>> Store::environments_of_config(
    const std::string& config_hash) const {
  return with_context("cannot read the trials of configuration " + config_hash, [&] {
    Statement query(db_.get(),
                    "SELECT t.identity, coalesce(t.environment, ''), max(r.id) AS last "
                    "FROM trials AS t JOIN runs AS r ON r.trial_id = t.id "
                    "WHERE t.config_hash = ?1 GROUP BY t.identity ORDER BY last DESC");
    query.bind_text(1, config_hash);
    std::vector<std::pair<std::string, std::string>> out;
    while (query.step()) out.emplace_back(query.text(0), query.text(1));
    return out;
  });
}

std::vector<IdentityTrial> Store::trials_of_identity(const std::string& identity) const {
  return with_context("cannot read the trials of " + identity.substr(0, 12), [&] {
    Statement query(db_.get(),
                    "SELECT t.id, e.name, (SELECT count(*) FROM runs WHERE runs.trial_id = t.id) "
                    "FROM trials AS t JOIN experiments AS e ON e.id = t.experiment_id "
                    "WHERE t.identity = ?1 ORDER BY t.id");
    query.bind_text(1, identity);
    std::vector<IdentityTrial> out;
    while (query.step()) out.push_back({query.int64(0), query.text(1), query.int64(2)});
    return out;
  });
}

std::vector<TrialInfo> Store::trials_of_experiment(const std::string& name) const {
  return with_context("cannot read the trials of experiment '" + name + "'", [&] {
    Statement query(db_.get(),
                    "SELECT trials.id, trials.config_json, coalesce(trials.label, ''), "
                    "trials.identity FROM trials JOIN experiments ON experiments.id = "
                    "trials.experiment_id WHERE experiments.name = ?1 ORDER BY trials.id");
    query.bind_text(1, name);
    std::vector<TrialInfo> out;
    while (query.step()) out.push_back({query.int64(0), query.text(1), query.text(2), query.text(3)});
    return out;
  });
}

std::vector<StoredSource> Store::experiment_sources(const std::string& name) const {
  return with_context("cannot read the files of experiment '" + name + "'", [&] {
    Statement query(db_.get(),
                    "SELECT coalesce(source_path, ''), coalesce(source_text, '') FROM experiments "
                    "WHERE name = ?1 ORDER BY id DESC");
    query.bind_text(1, name);
    std::vector<StoredSource> out;
    while (query.step()) out.push_back({query.text(0), query.text(1)});
    return out;
  });
}

std::vector<RunningRun> Store::running_runs() const {
  return with_context("cannot list running runs", [&] {
    Statement query(db_.get(),
                    "SELECT runs.id, runs.pid, "
                    "coalesce(runs.host, json_extract(fingerprints.json, '$.\"host.hostname\"')), "
                    "runs.boot_id, runs.pid_start "
                    "FROM runs LEFT JOIN fingerprints ON fingerprints.id = runs.fingerprint_id "
                    "WHERE runs.status = 'running' ORDER BY runs.id");
    std::vector<RunningRun> out;
    while (query.step()) {
      RunningRun run;
      run.run_id = query.int64(0);
      run.pid = query.is_null(1) ? 0 : query.int64(1);
      run.hostname = query.is_null(2) ? std::string() : query.text(2);
      run.boot_id = query.is_null(3) ? std::string() : query.text(3);
      run.pid_start = query.is_null(4) ? 0 : query.int64(4);
      out.push_back(std::move(run));
    }
    return out;
  });
}

std::optional<double> Store::peak_flop_per_s(std::int64_t fingerprint_id, const std::string& device,
                                             const std::string& dtype) const {
  return with_context("cannot read the measured peak", [&]() -> std::optional<double> {
    Statement query(db_.get(),
                    "SELECT flop_per_s FROM peaks WHERE fingerprint_id = ?1 AND device = ?2 AND "
                    "dtype = ?3");
    query.bind_int(1, fingerprint_id);
    query.bind_text(2, device);
    query.bind_text(3, dtype);
    if (!query.step()) return std::nullopt;
    return query.real(0, kNaN);
  });
}

std::optional<double> Store::peak_bytes_per_s(std::int64_t fingerprint_id,
                                              const std::string& device) const {
  return with_context("cannot read the measured bandwidth", [&]() -> std::optional<double> {
    Statement query(db_.get(),
                    "SELECT bytes_per_s FROM peak_bandwidth WHERE fingerprint_id = ?1 AND "
                    "device = ?2");
    query.bind_int(1, fingerprint_id);
    query.bind_text(2, device);
    if (!query.step()) return std::nullopt;
    return query.real(0, kNaN);
  });
}

// One query per table for all the runs (their ids as a JSON array through
// json_each): a history of 10,000 runs would take 90,000 get_run statements.
std::vector<RunDetail> Store::get_runs_brief(const std::vector<std::int64_t>& run_ids) const {
  return with_context("cannot read " + std::to_string(run_ids.size()) + " runs", [&] {
    std::string ids = "[";
    for (std::size_t i = 0; i < run_ids.size(); ++i) ids += (i ? "," : "") + std::to_string(run_ids[i]);
    ids += "]";
    const std::string in = " IN (SELECT value FROM json_each(?1))";
    std::map<std::int64_t, RunDetail> by_id;
    {
      Statement q(db_.get(), std::string("SELECT ") + kRunRowColumns + " FROM run_overview WHERE run_id" + in);
      q.bind_text(1, ids);
      while (q.step()) {
        RunRow row = read_run_row(q, path_);
        by_id[row.id].row = std::move(row);
      }
    }
    {
      Statement q(db_.get(),
                  "SELECT r.id, t.config_hash, coalesce(f.json, ''), coalesce(f.hash, ''), t.identity "
                  "FROM runs AS r JOIN trials AS t ON t.id = r.trial_id "
                  "LEFT JOIN fingerprints AS f ON f.id = r.fingerprint_id WHERE r.id" + in);
      q.bind_text(1, ids);
      while (q.step()) {
        RunDetail& d = by_id[q.int64(0)];
        d.config_hash = q.text(1);
        d.fingerprint_json = q.text(2);
        d.fingerprint_hash = q.text(3);
        d.identity = q.text(4);
      }
    }
    {
      Statement q(db_.get(), "SELECT run_id, metric, unit, n, mean, p50 FROM summaries WHERE run_id" + in +
                                 " ORDER BY run_id, metric");
      q.bind_text(1, ids);
      while (q.step()) {
        Summary s;
        s.metric = q.text(1);
        s.unit = q.text(2);
        s.n = q.int64(3);
        s.mean = q.real(4, kNaN);
        s.p50 = q.real(5, kNaN);
        by_id[q.int64(0)].summaries.push_back(std::move(s));
      }
    }
    {
      Statement q(db_.get(), "SELECT run_id, name, value, unit FROM metrics WHERE run_id" + in +
                                 " ORDER BY run_id, name");
      q.bind_text(1, ids);
      while (q.step()) by_id[q.int64(0)].metrics.push_back({q.text(1), q.real(2, kNaN), q.text(3)});
    }
    {
      Statement q(db_.get(), "SELECT run_id, name, value FROM run_labels WHERE run_id" + in);
      q.bind_text(1, ids);
      while (q.step()) by_id[q.int64(0)].labels.emplace(q.text(1), q.text(2));
    }
    std::vector<RunDetail> out;
    for (const std::int64_t id : run_ids)
      if (auto it = by_id.find(id); it != by_id.end() && it->second.row.id == id)
        out.push_back(std::move(it->second));
    return out;
  });
}

}  // namespace runner::store
