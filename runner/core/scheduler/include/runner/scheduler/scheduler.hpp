// The run scheduler: plans a prepared experiment's runs (interleaved
// repetitions, shards), skips what the store already holds (resume), claims
// each run in the store, executes it (in a child process by default) while
// keeping its heartbeat, records how it ended, and applies the stop policy.
// It prints nothing: what happens is reported to a RunObserver, which the CLI
// implements to print, and a test or a binding implements to watch.
// No LibTorch here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/engine/engine.hpp"
#include "runner/scheduler/plan.hpp"
#include "runner/scheduler/prepare.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// Where a run executes.
enum class Isolation {
  process,  ///< a forked child per run: a crash, hang or OOM costs that run only (default)
  none,     ///< in the scheduler's own process (debugging; no timeout)
};

/// What the run process is given to execute one run.
struct RunContext {
  store::Store* db = nullptr;           ///< the run process's own connection
  std::filesystem::path db_path;       ///< that connection's file ([profile] traces go next to it)
  std::int64_t run_id = 0;              ///< the run's row, status "running"
  const Trial* trial = nullptr;
  std::int64_t repeat = 0;
  const PluginHost* host = nullptr;
  const std::atomic<bool>* stop = nullptr;           ///< raised when the run should stop cleanly
  std::chrono::steady_clock::time_point origin;      ///< for time_to_first_step_s
  std::function<void(const Progress&)> on_progress;  ///< forwards to the observer
  /// A [distributed] run of a launched job: where its ranks meet (see
  /// SchedulerOptions::announce). Unset: the run forks its ranks.
  std::optional<Rendezvous> job;
};

/// Executes one run inside the run process and returns its outcome (the
/// scheduler records it). The default, execute_recorded_run(), fingerprints
/// the environment, measures the device's peak once per fingerprint and runs
/// the engine; tests substitute their own to drive the scheduler cheaply.
using RunBody = std::function<RunOutcome(const RunContext&)>;

/// The default RunBody.
[[nodiscard]] RunOutcome execute_recorded_run(const RunContext& context);

/// How a sweep is run.
struct SchedulerOptions {
  std::filesystem::path db;                        ///< the store
  Isolation isolation = Isolation::process;
  bool shuffle = false;                            ///< shuffle the trial order of every round
  ResumePolicy policy = ResumePolicy::missing;
  std::int64_t max_failures = 0;                   ///< stop after this many failed runs; 0: no limit
  std::int64_t max_consecutive_failures = 5;       ///< stop after this many in a row; 0: no limit
  Shard shard;                                     ///< the slice of runs this invocation owns
  std::chrono::duration<double> heartbeat{10.0};   ///< how often a running run's heartbeat is written
  /// When the invocation started: the first run's time_to_first_step_s counts from here.
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  RunBody body = execute_recorded_run;
  /// The runner executable a run whose environment differs from this
  /// process's is executed by (see serve_fresh_run); "/proc/self/exe" is this one.
  std::filesystem::path executable = "/proc/self/exe";
  /// Rank 0 of a launched job (torchrun): called before each [distributed]
  /// run with (experiment file, trial, repeat), tells the job's other ranks
  /// to join that run and returns where they meet. Unset: runner forks a
  /// [distributed] run's ranks itself.
  std::function<Rendezvous(std::size_t, std::size_t, std::int64_t, const Trial&)> announce;
  /// Record the trials under this stored experiment row instead of the
  /// file's own (`rerun`: the rerun run joins the original run's trial).
  std::optional<std::int64_t> experiment_id;
  /// --label KEY=VALUE: recorded with every run over the file's [experiment]
  /// labels (resolve_labels() also fills commit from the CI's variables).
  Labels labels;
};

/// One planned run and what resume decided for it.
struct PlannedAction {
  PlannedRun run;           ///< run.trial indexes the trials of its experiment
  std::string skip_reason;  ///< empty: it runs
  std::size_t experiment = 0;  ///< which of the sweep's experiment files
  /// For a run that runs while runs of the same configuration are recorded
  /// under another identity: what changed since then ("env.OMP_NUM_THREADS:
  /// (unset) -> 1", or that the plugin libraries did).
  std::vector<std::string> changes;
  /// The trial's row in the store (`trial:N`), when it is already recorded.
  std::optional<std::int64_t> trial_id;
  /// Set when an earlier file of the sweep has a trial of the same identity
  /// that runs this repetition: (experiment file, trial). Its runs are this trial's.
  std::optional<std::pair<std::size_t, std::size_t>> shared_with;
};

/// The experiment files one invocation runs as one interleaved schedule.
using Sweep = std::vector<const PreparedExperiment*>;

/// What the scheduler is about to do (reported once, before the first run).
struct SweepPlan {
  std::size_t trials = 0;              ///< of every experiment file
  std::int64_t repeats = 0;            ///< the most of any experiment file
  std::size_t experiments = 1;         ///< experiment files in the schedule
  std::size_t to_run = 0;
  std::size_t skipped = 0;             ///< already done (resume)
  std::size_t shared = 0;              ///< run by an earlier file's trial of the same identity
  std::int64_t marked_interrupted = 0; ///< runs left "running" by a runner that is gone
};

/// A run that is about to start.
struct RunStarted {
  std::int64_t run_id = 0;
  const Trial* trial = nullptr;
  std::int64_t trial_id = 0;           ///< the trial's row in the store (`trial:N`)
  std::int64_t repeat = 0;
  std::size_t position = 0;            ///< 1-based among the runs of this invocation
  std::size_t total = 0;               ///< runs this invocation will run
  std::optional<double> eta_s;         ///< time left, from the runs so far
  std::int64_t failures = 0;           ///< failed runs so far
};

/// A run that has ended, as recorded in the store.
struct RunEnded {
  RunStarted started;
  store::RunDetail detail;             ///< status (effective), error, summaries, metrics
};

/// Why the sweep stopped before its plan was done.
enum class StopReason {
  none,                   ///< it did not: every planned run ran
  interrupted,            ///< SIGINT or SIGTERM
  max_failures,           ///< SchedulerOptions::max_failures reached
  consecutive_failures,   ///< SchedulerOptions::max_consecutive_failures reached
};

/// The sweep's outcome.
struct SweepResult {
  std::size_t planned = 0;             ///< runs to run after resume
  std::size_t done = 0;                ///< runs executed now
  std::size_t skipped = 0;             ///< runs skipped as already done (taken included)
  std::size_t taken = 0;               ///< of those, runs another runner claimed meanwhile
  std::size_t shared = 0;              ///< runs an earlier file's trial of the same identity runs
  std::int64_t failures = 0;           ///< runs that ended other than finished or interrupted
  std::int64_t consecutive_failures = 0;
  StopReason stop = StopReason::none;
  /// repeats = "auto": why the rounds ended ("after 5 round(s): 1 of 1
  /// expectation(s) decided ..."); empty for a fixed number of repeats.
  std::string auto_stop;
};

/// Receives what the scheduler does. Every method has an empty default.
/// on_progress is called in the run process (a fork of this one) when runs are
/// isolated; the others in the scheduler's process.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void on_plan(const SweepPlan& plan) {}
  virtual void on_run_started(const RunStarted& run) {}
  virtual void on_progress(const RunStarted& run, const Progress& progress) {}
  virtual void on_run_ended(const RunEnded& run) {}
  /// repeats = "auto": what the look before round `round` found (`round` rounds are done).
  virtual void on_round_look(std::int64_t round, const std::string& finding) {}
};

/// The runs a sweep plans, in order, with what resume would decide for each,
/// read from `db` without writing (a missing file: nothing exists yet).
[[nodiscard]] std::vector<PlannedAction> plan_sweep(const PreparedExperiment& experiment,
                                                    const SchedulerOptions& options);
/// The same for several experiment files, interleaved as one schedule (the
/// trial order of the first file's seed when shuffled).
[[nodiscard]] std::vector<PlannedAction> plan_sweep(const Sweep& sweep,
                                                    const SchedulerOptions& options);

/// Per trial of `experiment`: its row in the store `db` (the id `trial:N`
/// selects), when a run of it has recorded the trial already; read without
/// writing (a missing file: nothing recorded).
[[nodiscard]] std::vector<std::optional<std::int64_t>> recorded_trial_ids(
    const PreparedExperiment& experiment, const std::filesystem::path& db);

/// Runs the sweep: records the experiment and its trials, marks runs orphaned
/// by a dead runner interrupted, then runs every planned run not already done,
/// interleaved, until done, interrupted (SIGINT/SIGTERM) or stopped by the
/// failure policy. Throws runner::Error when the store cannot be written.
SweepResult run_sweep(const PreparedExperiment& experiment, const SchedulerOptions& options,
                      RunObserver& observer);
/// Several experiment files as one schedule (A1 B1 A2 B2 ...), each recorded
/// under its own experiment, so that a comparison across files is fair.
SweepResult run_sweep(const Sweep& sweep, const SchedulerOptions& options, RunObserver& observer);

/// Why a trial's run process cannot be a fork of this process: the [env]
/// variables whose value differs from this process's, and an allocator to
/// preload ("[env] OMP_NUM_THREADS", "allocator jemalloc"). Empty: a fork will do.
[[nodiscard]] std::vector<std::string> fresh_process_reasons(const Experiment& experiment);

/// The body of `runner __run-fresh REQUEST REASON LINES` (not a user command):
/// a run process started by exec instead of fork, because its environment
/// must differ from the runner's. Reads its request from the file descriptor
/// REQUEST, prepares the experiment again (refusing it if its identity
/// changed), runs and records the run as a forked run process does, writes a
/// failure it cannot record to REASON and progress lines to LINES. Returns
/// the process's exit code.
[[nodiscard]] int serve_fresh_run(int request_fd, int reason_fd, int line_fd);

/// Runs left "running" by a runner process of this host that no longer
/// exists are finished as "interrupted" now (resume reruns them). Returns how many.
std::int64_t mark_orphans_interrupted(store::Store& db);

}  // namespace runner
