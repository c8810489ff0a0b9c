// repeats = "auto": the look after every round that decides whether the
// sweep has its answer (docs/method.md, "Repetitions that stop when the
// answer is known"). The scheduler runs the rounds and calls these; `runner
// check` judges with the same interval. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <chrono>

#include "runner/scheduler/judge.hpp"
#include "runner/scheduler/scheduler.hpp"
#include "runner/scheduler/plan.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// A file without [[expect]] stops once every trial's median is known within
/// this fraction either way (the half-width of its 95 % interval).
inline constexpr double kAutoPrecision = 0.01;

/// The sequential design of an experiment with repeats = "auto".
[[nodiscard]] store::SequentialDesign sequential_design(const Experiment& experiment);

/// The interval repeats = "auto" judges with at the look after `round`
/// rounds: sequential_ratio_interval, for store::ExpectationOptions::interval.
[[nodiscard]] store::RatioIntervalMethod sequential_interval_method(const Experiment& experiment,
                                                                    std::int64_t round);

/// The judge options of an experiment looked at after `round` rounds: the
/// sequential interval when its repeats are "auto", compare's otherwise.
[[nodiscard]] JudgeOptions judge_options_for(const Experiment& experiment, std::int64_t round);

/// The rounds `db` holds for `experiment`: the fewest finished runs any of
/// its trials has (the look the next round would take).
[[nodiscard]] std::int64_t recorded_rounds(const PreparedExperiment& experiment,
                                           const store::Store& db);

/// What a look after a round found.
struct RoundLook {
  bool answered = false;  ///< every expectation decided (or, without any, every median precise)
  std::string why;        ///< in words: "2 of 2 expectations decided (1 holds, 1 refuted)"
};

/// Looks at what `db` holds for `experiment` after `round` rounds: its
/// expectations judged with the sequential interval, or, without any, each
/// trial's headline median against kAutoPrecision.
[[nodiscard]] RoundLook look_after_round(const PreparedExperiment& experiment,
                                         const store::Store& db, std::int64_t round);

/// The plan's line for an auto experiment: "repeats = \"auto\": rounds of
/// one run of every trial, looked at from round 3, at most 30 rounds (time
/// budget 20m); stops when its 2 expectations are decided".
[[nodiscard]] std::string auto_repeats_line(const PreparedExperiment& experiment);

/// Throws runner::Error when the sweep cannot run with auto repeats: a
/// shard (the look needs every trial's runs), or files that mix "auto" and
/// a fixed count in one schedule. Nothing for a sweep without "auto".
void check_auto_repeats(const std::vector<const PreparedExperiment*>& sweep, const Shard& shard);

/// What to do before a round of an auto sweep.
struct RoundDecision {
  bool looked = false;  ///< the runs were judged (from min_repeats rounds on)
  bool stop = false;    ///< do not start the round
  std::string why;      ///< the look's finding, or the time budget spent
};

/// Before round `round` (0-based: `round` rounds are behind it) of an auto
/// sweep, `elapsed_s` after the invocation started: stop when the time
/// budget is spent, or, from every file's min_repeats on, when every file's
/// look is answered.
[[nodiscard]] RoundDecision decide_before_round(const std::vector<const PreparedExperiment*>& sweep,
                                                const store::Store& db, std::int64_t round,
                                                double elapsed_s);

/// The rounds of an auto sweep as the scheduler runs them: it asks before
/// every run whether its round may start, and reports each look to the observer.
class AutoRounds {
 public:
  /// The sweep's rounds, timed from `start` (the invocation's).
  AutoRounds(const std::vector<const PreparedExperiment*>& sweep,
             std::chrono::steady_clock::time_point start, RunObserver& observer);
  /// Before a run of repetition `repeat`: true when the rounds stop there.
  [[nodiscard]] bool stop_before(std::int64_t repeat, const store::Store& db);
  /// After the loop: why the rounds ended (a last look when they ran to max_repeats).
  [[nodiscard]] std::string finish(const store::Store& db);

 private:
  std::vector<const PreparedExperiment*> sweep_;
  std::chrono::steady_clock::time_point start_;
  RunObserver* observer_;
  std::int64_t round_ = -1;  // the repetition whose runs are running
  std::string stopped_;      // why the rounds stopped; empty while they go on
};

/// True when the sweep's files run with repeats = "auto".
[[nodiscard]] bool is_auto(const std::vector<const PreparedExperiment*>& sweep);

}  // namespace runner
