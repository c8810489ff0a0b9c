// Two sides of runs compared metric by metric (see comparison.hpp).
#include "comparison.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/scheduler/judge.hpp"
#include "table.hpp"

namespace runner::cli {

std::vector<MetricSpec> compared_metrics(const std::string& headline) {
  constexpr store::Direction lower = store::Direction::lower_is_better;
  constexpr store::Direction higher = store::Direction::higher_is_better;
  std::vector<MetricSpec> metrics = {{headline, lower, MetricKind::time}};
  for (const store::PhaseInfo& phase : store::kPhases)
    metrics.push_back({phase.name, lower, MetricKind::time});
  metrics.push_back({"samples_per_s", higher, MetricKind::throughput});
  // Kernel runs (docs/kernels.md): what a call moved and computed per second.
  metrics.push_back({"bandwidth_bytes_per_s", higher, MetricKind::throughput});
  metrics.push_back({"flop_per_s", higher, MetricKind::throughput});
  metrics.push_back({"tokens_per_s", higher, MetricKind::throughput});
  // What the input pipeline can make when never blocked (docs/data.md).
  metrics.push_back({"loader_samples_per_s", higher, MetricKind::throughput});
  // The other side of a time/memory trade (checkpointing, precision), and
  // what a faster recipe may have cost in quality, in the same comparison.
  metrics.push_back({"peak_cpu_alloc_bytes", lower, MetricKind::memory});
  metrics.push_back({"peak_cuda_allocated_bytes", lower, MetricKind::memory});
  metrics.push_back({"eval_loss", lower, MetricKind::quality});
  metrics.push_back({"eval_accuracy", higher, MetricKind::quality});
  metrics.push_back({"eval_perplexity", lower, MetricKind::quality});
  return metrics;
}

void add_run_values(const store::RunDetail& run, const std::string& metric,
                    std::vector<double>& out) {
  // One reading of a run's value for compare, check and auto repetitions alike.
  runner::add_run_values(run, metric, out);
}

namespace {

std::vector<double> values_of(const Side& side, const std::string& metric) {
  std::vector<double> out;
  for (const auto& run : side.runs) add_run_values(run, metric, out);
  return out;
}

// Per-run values of a metric with the run's start time, for the schedule check.
std::vector<store::TimedValue> timed_values_of(const Side& side, const std::string& metric) {
  std::vector<store::TimedValue> out;
  for (const auto& run : side.runs) {
    const auto start = epoch_seconds(run.row.started_at);
    if (!start) continue;
    std::vector<double> values;
    add_run_values(run, metric, values);
    for (double v : values) out.push_back({*start, v});
  }
  return out;
}

}  // namespace

SideComparison compare_sides(const Side& a, const Side& b, std::optional<double> margin) {
  SideComparison out;
  // The fingerprint diff first: a difference in the environment explains more
  // than any statistic.
  const auto fingerprint_of = [](const Side& s) {
    std::set<std::string> hashes;
    for (const auto& r : s.runs) hashes.insert(r.fingerprint_hash);
    return std::make_pair(hashes.size(), parse_json_object(s.runs.front().fingerprint_json));
  };
  const auto [count_a, fp_a] = fingerprint_of(a);
  const auto [count_b, fp_b] = fingerprint_of(b);
  out.fingerprints_a = count_a;
  out.fingerprints_b = count_b;
  out.diff = store::diff_fingerprints(fp_a, fp_b);
  out.headline = headline_metric(a.runs.front().row.kind);
  for (const MetricSpec& metric : compared_metrics(out.headline)) {
    const auto va = values_of(a, metric.name), vb = values_of(b, metric.name);
    if (va.empty() || vb.empty()) continue;
    MetricRow row{metric, store::compare_samples(va, vb, metric.direction)};
    row.margin_pct = margin ? *margin : store::noise_margin_pct(row.result);
    row.practical = store::practical_verdict(row.result, row.margin_pct);
    out.rows.push_back(std::move(row));
  }
  // When each side's runs happened: two blocks of time let machine drift
  // between them read as an effect.
  const auto ta = timed_values_of(a, out.headline), tb = timed_values_of(b, out.headline);
  if (!ta.empty() && !tb.empty()) out.schedule = store::check_schedule(ta, tb);
  return out;
}

std::string verdict_text(const MetricRow& row) {
  const store::Practical v = row.practical;
  if ((v != store::Practical::faster && v != store::Practical::slower) ||
      row.spec.kind == MetricKind::time || row.spec.kind == MetricKind::throughput)
    return store::practical_text(row.result, row.margin_pct);
  const bool b_better = v == store::Practical::faster;
  if (row.spec.kind == MetricKind::memory) return b_better ? "smaller" : "larger";
  return b_better ? "better" : "worse";
}

std::string interval_cell(const MetricRow& row) {
  if (row.result.deterministic) return "-";
  return "[" + fixed(row.result.ratio.lower, 3) + ", " + fixed(row.result.ratio.upper, 3) + "]";
}

std::string p_cell(const MetricRow& row) {
  return row.result.deterministic ? "-" : fixed(row.result.test.p_value, 4);
}

std::string sample_size_note(const SideComparison& c) {
  for (const MetricRow& row : c.rows) {
    const store::Comparison& r = row.result;
    if (r.deterministic) continue;
    const std::string limit = store::sample_size_limit(r.n_a, r.n_b, r.alpha);
    if (limit.empty()) continue;
    char smallest[32];
    std::snprintf(smallest, sizeof smallest, "%#.2g", r.smallest_p);
    return "cannot decide: " + limit + " (the smallest two-sided Mann-Whitney U p with these runs is " +
           smallest + "); record more repetitions (e.g. --set experiment.repeats=" +
           std::to_string(std::max(store::least_runs_per_side(r.alpha), store::kMinReliableRepetitions)) +
           ") and compare again";
  }
  return "";
}

std::string seed_note(const SideComparison& c) {
  std::string names;
  int count = 0;
  for (const MetricRow& row : c.rows)
    if (row.result.deterministic && row.spec.kind == MetricKind::quality)
      names += (count++ ? ", " : "") + row.spec.name;
  if (names.empty()) return "";
  return "note: " + names + (count > 1 ? " have" : " has") +
         " the same value in every run of a side (one seed): the difference holds for that "
         "seed only; for a spread across seeds, sweep the seed as a factor (\"experiment.seed\" = "
         "[0, 1, 2, 3, 4] under [sweep], or runs with --set experiment.seed=N) and compare again";
}

std::string format_metric(double value, MetricKind kind) {
  if (kind == MetricKind::time) return format_ns(value);
  if (kind == MetricKind::memory) return format_number(value / 1e6) + " MB";
  return format_number(value);
}

}  // namespace runner::cli
