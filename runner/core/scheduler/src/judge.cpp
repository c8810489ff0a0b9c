// Judging an experiment's expectations against a store (judge.hpp).
#include "runner/scheduler/judge.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace runner {

namespace {

const std::vector<Expectation> kNone;

bool failed(store::RunStatus status) {
  return status != store::RunStatus::finished && status != store::RunStatus::running &&
         status != store::RunStatus::interrupted;
}

// The runs of the trials at `indices` (Trial::index) and their values: every
// finished run of each trial's identity, whichever experiment recorded it,
// each run once.
void collect(const PreparedExperiment& experiment, const std::vector<std::int64_t>& indices,
             const std::string& metric, const store::Store& db, std::vector<std::int64_t>& runs,
             std::vector<double>& values, std::int64_t& failures) {
  std::set<std::int64_t> seen;
  for (std::size_t t = 0; t < experiment.trials.size(); ++t) {
    if (std::find(indices.begin(), indices.end(), experiment.trials[t].index) == indices.end())
      continue;
    for (const store::TrialRun& r : db.runs_of_identity(experiment.identities[t])) {
      if (!seen.insert(r.run_id).second) continue;
      if (failed(r.status)) ++failures;
      if (r.status != store::RunStatus::finished) continue;
      const auto run = db.get_run(r.run_id);
      if (!run) continue;
      const std::size_t before = values.size();
      add_run_values(*run, metric, values);
      // One value a run: a metric recorded both as a summary and a scalar counts once.
      values.resize(std::min(values.size(), before + 1));
      if (values.size() > before) runs.push_back(r.run_id);
    }
  }
}

}  // namespace

store::ExpectedBound expected_bound(const Expectation& expectation) {
  store::ExpectedBound bound;
  bound.value = expectation.value;
  switch (expectation.bound) {
    case ExpectBound::ratio_below: bound.kind = store::BoundKind::ratio_below; break;
    case ExpectBound::ratio_above: bound.kind = store::BoundKind::ratio_above; break;
    case ExpectBound::equivalent_within: bound.kind = store::BoundKind::equivalent_within; break;
  }
  return bound;
}

void add_run_values(const store::RunDetail& run, const std::string& metric,
                    std::vector<double>& out) {
  for (const auto& s : run.summaries)
    if (s.metric == metric && s.n > 0 && s.p50 > 0) out.push_back(s.p50);
  for (const auto& m : run.metrics)
    if (m.name == metric && m.value > 0 && std::isfinite(m.value)) out.push_back(m.value);
}

const std::vector<Expectation>& expectations_of(const PreparedExperiment& experiment) {
  if (experiment.trials.empty() || !experiment.first().expectations) return kNone;
  return *experiment.first().expectations;
}

Judgement judge_expectation(const PreparedExperiment& experiment, const Expectation& expectation,
                            const store::Store& db, const JudgeOptions& options) {
  Judgement j;
  j.expectation = expectation;
  collect(experiment, expectation.trials_a, expectation.metric, db, j.runs_a, j.values_a, j.failed);
  collect(experiment, expectation.trials_b, expectation.metric, db, j.runs_b, j.values_b, j.failed);
  j.result = store::judge_expectation(j.values_a, j.values_b, expected_bound(expectation),
                                      options.statistics);
  return j;
}

std::vector<Judgement> judge_expectations(const PreparedExperiment& experiment,
                                          const store::Store& db, const JudgeOptions& options) {
  std::vector<Judgement> out;
  for (const Expectation& e : expectations_of(experiment))
    out.push_back(judge_expectation(experiment, e, db, options));
  return out;
}

}  // namespace runner
