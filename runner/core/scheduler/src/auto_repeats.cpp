// repeats = "auto": the look after every round (auto_repeats.hpp).
#include "runner/scheduler/auto_repeats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runner/common/error.hpp"
#include "runner/common/run_kind.hpp"

namespace runner {
namespace {

std::string duration_text(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

// Every trial's headline median known within kAutoPrecision either way.
RoundLook precision_look(const PreparedExperiment& experiment, const store::Store& db) {
  const std::string metric = headline_metric(experiment.first().kind);
  std::size_t precise = 0;
  double widest = 0;
  for (std::size_t t = 0; t < experiment.trials.size(); ++t) {
    std::vector<double> values;
    for (const store::TrialRun& r : db.runs_of_identity(experiment.identities[t])) {
      if (r.status != store::RunStatus::finished) continue;
      if (const auto run = db.get_run(r.run_id)) add_run_values(*run, metric, values);
    }
    if (values.size() < 2) {
      widest = INFINITY;
      continue;
    }
    const store::MedianInterval m = store::bootstrap_median(values);
    const double half = (m.upper - m.lower) / 2 / m.median;
    widest = std::max(widest, half);
    if (half <= kAutoPrecision) ++precise;
  }
  RoundLook look;
  look.answered = precise == experiment.trials.size();
  char text[64];
  std::snprintf(text, sizeof text, "%.1f%%", widest * 100);
  look.why = std::to_string(precise) + " of " + std::to_string(experiment.trials.size()) +
             " trial(s) with their " + metric + " median known within +/-" +
             (kAutoPrecision * 100 == 1 ? std::string("1%") : std::to_string(kAutoPrecision)) +
             (std::isfinite(widest) ? " (widest +/-" + std::string(text) + ")" : std::string());
  return look;
}

}  // namespace

store::SequentialDesign sequential_design(const Experiment& e) {
  store::SequentialDesign design;
  design.min_repeats = static_cast<std::size_t>(e.min_repeats);
  design.max_repeats = static_cast<std::size_t>(e.max_repeats);
  return design;
}

store::RatioIntervalMethod sequential_interval_method(const Experiment& e, std::int64_t round) {
  const store::SequentialDesign design = sequential_design(e);
  const auto look = static_cast<std::size_t>(std::max<std::int64_t>(round, 0));
  return [design, look](const std::vector<double>& a, const std::vector<double>& b) {
    const store::RankRatioInterval r = store::sequential_ratio_interval(a, b, design, look);
    store::RatioInterval out;
    out.ratio = r.ratio;
    out.lower = r.lower;
    out.upper = r.upper;
    out.confidence = r.confidence;
    return out;
  };
}

JudgeOptions judge_options_for(const Experiment& e, std::int64_t round) {
  JudgeOptions options;
  if (e.auto_repeats) options.statistics.interval = sequential_interval_method(e, round);
  return options;
}

std::int64_t recorded_rounds(const PreparedExperiment& experiment, const store::Store& db) {
  std::int64_t fewest = -1;
  for (const std::string& identity : experiment.identities) {
    std::int64_t finished = 0;
    for (const store::TrialRun& r : db.runs_of_identity(identity))
      finished += r.status == store::RunStatus::finished ? 1 : 0;
    fewest = fewest < 0 ? finished : std::min(fewest, finished);
  }
  return std::max<std::int64_t>(fewest, 0);
}

RoundLook look_after_round(const PreparedExperiment& experiment, const store::Store& db,
                           std::int64_t round) {
  if (expectations_of(experiment).empty()) return precision_look(experiment, db);
  std::size_t holds = 0, refuted = 0;
  const auto judged =
      judge_expectations(experiment, db, judge_options_for(experiment.first(), round));
  for (const Judgement& j : judged) {
    if (j.result.verdict == store::ExpectationVerdict::holds) ++holds;
    if (j.result.verdict == store::ExpectationVerdict::refuted) ++refuted;
  }
  RoundLook look;
  look.answered = holds + refuted == judged.size();
  look.why = std::to_string(holds + refuted) + " of " + std::to_string(judged.size()) +
             " expectation(s) decided (" + std::to_string(holds) + " holds, " +
             std::to_string(refuted) + " refuted)";
  return look;
}

std::string auto_repeats_line(const PreparedExperiment& experiment) {
  const Experiment& e = experiment.first();
  const std::size_t expectations = expectations_of(experiment).size();
  std::string line = e.name + ": repeats = \"auto\": rounds of one run of every trial, looked at "
                     "after each from round " + std::to_string(e.min_repeats) + ", at most " +
                     std::to_string(e.max_repeats) + " rounds";
  if (e.time_budget_s) line += ", no round started after " + duration_text(*e.time_budget_s);
  if (expectations > 0)
    line += "; stops when its " + std::to_string(expectations) +
            " expectation(s) are decided (the first look that can decide: round " +
            std::to_string(store::first_deciding_round(sequential_design(e))) + ")";
  else
    line += "; no [[expect]]: stops when every trial's " +
            std::string(headline_metric(e.kind)) + " median is known within +/-1%";
  return line;
}

RoundDecision decide_before_round(const std::vector<const PreparedExperiment*>& sweep,
                                  const store::Store& db, std::int64_t round, double elapsed_s) {
  RoundDecision d;
  std::int64_t first_look = 0;
  for (const PreparedExperiment* p : sweep) {
    const Experiment& e = p->first();
    first_look = std::max(first_look, e.min_repeats);
    if (e.time_budget_s && elapsed_s >= *e.time_budget_s) {
      d.stop = true;
      d.why = "the time budget of " + e.name + " (" + duration_text(*e.time_budget_s) +
              ") is spent after " + std::to_string(round) + " round(s)";
      return d;
    }
  }
  if (round < first_look) return d;
  d.looked = true;
  d.stop = true;
  std::vector<std::string> findings;
  for (const PreparedExperiment* p : sweep) {
    const RoundLook look = look_after_round(*p, db, round);
    d.stop = d.stop && look.answered;
    findings.push_back(sweep.size() > 1 ? p->first().name + ": " + look.why : look.why);
  }
  d.why = "after " + std::to_string(round) + " round(s): ";
  for (std::size_t i = 0; i < findings.size(); ++i) d.why += (i > 0 ? "; " : "") + findings[i];
  return d;
}

AutoRounds::AutoRounds(const std::vector<const PreparedExperiment*>& sweep,
                       std::chrono::steady_clock::time_point start, RunObserver& observer)
    : sweep_(sweep), start_(start), observer_(&observer) {}

bool AutoRounds::stop_before(std::int64_t repeat, const store::Store& db) {
  if (!stopped_.empty()) return true;
  if (repeat == round_) return false;
  round_ = repeat;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const RoundDecision d = decide_before_round(sweep_, db, repeat, elapsed);
  if (d.looked) observer_->on_round_look(repeat, d.why);
  if (d.stop) stopped_ = d.why;
  return d.stop;
}

std::string AutoRounds::finish(const store::Store& db) {
  if (!stopped_.empty()) return stopped_;
  std::int64_t most = 0;
  for (const PreparedExperiment* p : sweep_) most = std::max(most, p->first().max_repeats);
  const RoundDecision d = decide_before_round(sweep_, db, most, 0);
  if (d.looked) observer_->on_round_look(most, d.why);
  return d.stop ? d.why : "max_repeats (" + std::to_string(most) + ") reached, " + d.why;
}

bool is_auto(const std::vector<const PreparedExperiment*>& sweep) {
  for (const PreparedExperiment* p : sweep)
    if (!p->trials.empty() && p->first().auto_repeats) return true;
  return false;
}

void check_auto_repeats(const std::vector<const PreparedExperiment*>& sweep, const Shard& shard) {
  if (!is_auto(sweep)) return;
  for (const PreparedExperiment* p : sweep)
    if (!p->trials.empty() && !p->first().auto_repeats)
      throw Error(p->first().name + " has repeats = " + std::to_string(p->first().repeats) +
                      ", but another file of this schedule has repeats = \"auto\"",
                  "run them separately, or give every file of one schedule repeats = \"auto\"");
  if (shard.count > 1)
    throw Error("--shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                    " cannot run repeats = \"auto\": the look after every round needs the runs "
                    "of every trial, and a shard holds only some of them",
                "run it without --shard, or shard a fixed design (--set "
                "experiment.repeats=N) and judge the merged store with runner check --no-run");
}

}  // namespace runner
