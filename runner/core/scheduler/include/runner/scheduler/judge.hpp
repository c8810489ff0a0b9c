// Judging an experiment's [[expect]] tables against a store: each
// expectation's two sides are the trials it names (by value of its `by` key
// and its `where`), their values the per-run values of its metric in the
// finished runs the store holds for those trials (any experiment that ran the
// same identity: the runs resume would count), and the verdict comes from the
// statistics module (store::judge_expectation). `runner check` prints these;
// repeats = "auto" judges after every round to decide when to stop.
// No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/experiment/expect.hpp"
#include "runner/scheduler/prepare.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// One expectation judged.
struct Judgement {
  Expectation expectation;                     ///< as the file states it
  std::vector<std::int64_t> runs_a, runs_b;    ///< the finished runs whose values were used, by id
  std::vector<double> values_a, values_b;      ///< their per-run values of the metric, in that order
  std::int64_t failed = 0;                     ///< runs of the sides' trials that ended failed (crash, timeout, diverged...)
  store::ExpectationResult result;             ///< verdict, ratio, interval, runs needed
};

/// Settings of judge_expectations.
struct JudgeOptions {
  /// The interval and its level: compare's bootstrap by default; repeats =
  /// "auto" sets statistics.interval to its anytime-valid sequence.
  store::ExpectationOptions statistics{};
};

/// The statistics module's bound for an expectation's.
[[nodiscard]] store::ExpectedBound expected_bound(const Expectation& expectation);

/// The per-run values of `metric` in a run, as `compare` reads them: the
/// run's p50 of a per-step series (a phase or summary) and a scalar metric of
/// that name, each only when positive and finite.
void add_run_values(const store::RunDetail& run, const std::string& metric,
                    std::vector<double>& out);

/// Judges one expectation of `experiment` (its trials_a / trials_b index
/// experiment.trials by Trial::index) against the runs `db` holds.
[[nodiscard]] Judgement judge_expectation(const PreparedExperiment& experiment,
                                          const Expectation& expectation, const store::Store& db,
                                          const JudgeOptions& options = {});

/// Every expectation of `experiment`, in file order (none: empty).
[[nodiscard]] std::vector<Judgement> judge_expectations(const PreparedExperiment& experiment,
                                                        const store::Store& db,
                                                        const JudgeOptions& options = {});

/// The expectations a prepared experiment states (its first trial's; empty when none).
[[nodiscard]] const std::vector<Expectation>& expectations_of(const PreparedExperiment& experiment);

}  // namespace runner
