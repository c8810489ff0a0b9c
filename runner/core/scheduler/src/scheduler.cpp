#include "runner/scheduler/scheduler.hpp"

#include <filesystem>
#include <set>

#include "liveness.hpp"
#include "record.hpp"
#include "runner/common/error.hpp"
#include "runner/fingerprint/fingerprint.hpp"
#include "runner/process/fd.hpp"
#include "runner/process/isolation.hpp"

namespace fs = std::filesystem;

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

// The runs of this invocation, in execution order: repetitions interleaved
// across trials (A1 B1 A2 B2 ...), restricted to the shard.
std::vector<PlannedRun> planned_runs(const PreparedExperiment& p, const SchedulerOptions& options) {
  const Experiment& first = p.first();
  std::vector<PlannedRun> plan;
  for (const PlannedRun& r : interleave(p.trials.size(), first.repeats, options.shuffle,
                                        static_cast<std::uint64_t>(first.seed)))
    if (in_shard(p.identities[r.trial], r.repeat, options.shard)) plan.push_back(r);
  return plan;
}

// What the store already holds for every trial (resume matches by identity),
// with runs whose runner process is gone shown as the interrupted runs they
// are (a dry run must not write that down, but must decide the same way).
std::vector<std::vector<store::TrialRun>> existing_runs(const PreparedExperiment& p,
                                                        const store::Store& db) {
  std::set<std::int64_t> gone;
  for (const auto& run : db.running_runs())
    if (liveness_of(run) == Liveness::gone) gone.insert(run.run_id);
  std::vector<std::vector<store::TrialRun>> existing;
  for (const auto& identity : p.identities) {
    existing.push_back(db.runs_of_identity(identity));
    for (auto& run : existing.back())
      if (gone.count(run.run_id) != 0) run.status = store::RunStatus::interrupted;
  }
  return existing;
}

// Executes one claimed run and leaves its verdict in the store. With process
// isolation the store connection is closed around the fork: SQLite's locking
// state must never be inherited by a child process.
void execute(const PreparedExperiment& p, const SchedulerOptions& options,
             std::optional<store::Store>& connection, std::int64_t run_id, const PlannedRun& r,
             const RunStarted& started, Clock::time_point origin, RunObserver& observer) {
  const Trial& trial = p.trials[r.trial];
  RunContext context;
  context.run_id = run_id;
  context.trial = &trial;
  context.repeat = r.repeat;
  context.host = p.host.get();
  context.origin = origin;
  context.on_progress = [&](const Progress& progress) { observer.on_progress(started, progress); };
  if (options.isolation == Isolation::none) {
    context.db = &*connection;
    context.stop = &Interrupts::flag();
    RunOutcome outcome;
    try {
      outcome = options.body(context);
    } catch (const std::exception& e) {
      outcome.status = store::RunStatus::failed;
      outcome.error = failure_reason(e.what());
    }
    record_outcome(*connection, run_id, outcome);
    return;
  }
  ChildOptions child;
  child.timeout = std::chrono::duration<double>(trial.experiment.timeout_s);
  child.tick = options.heartbeat;
  child.on_tick = [&] { store::Store::open(options.db).heartbeat(run_id); };
  // A run process that fails outside the engine (a setting LibTorch refuses,
  // a full disk while recording) records its own reason; when even that is
  // impossible it passes the reason to this process through `reason`.
  Pipe reason = make_pipe();
  connection.reset();
  const ChildExit exit = run_in_child(
      [&]() -> int {
        reason.read.reset();
        try {
          store::Store db = store::Store::open(options.db);
          context.db = &db;
          context.stop = &child_stop_flag();
          const RunOutcome outcome = options.body(context);
          record_outcome(db, run_id, outcome);
          return outcome.status == store::RunStatus::finished ? 0 : 3;
        } catch (const std::exception& e) {
          const std::string why = failure_reason(e.what());
          try {
            store::Store::open(options.db).finish_run(run_id, store::RunStatus::failed, why, {}, {});
            return 3;
          } catch (...) {
            (void)write_all(reason.write.get(), why);
          }
          return 1;
        }
      },
      child);
  reason.write.reset();
  const std::string why = read_all(reason.read.get());
  connection.emplace(store::Store::open(options.db));
  record_child_exit(*connection, run_id, exit, trial.experiment.timeout_s, why);
}

}  // namespace

std::vector<PlannedAction> plan_sweep(const PreparedExperiment& p,
                                      const SchedulerOptions& options) {
  std::vector<std::vector<store::TrialRun>> existing(p.trials.size());
  std::error_code ec;
  if (fs::exists(options.db, ec)) existing = existing_runs(p, store::Store::open_read_only(options.db));
  std::vector<PlannedAction> actions;
  for (const PlannedRun& r : planned_runs(p, options))
    actions.push_back({r, skip_reason(existing[r.trial], r.repeat, options.policy)});
  return actions;
}

SweepResult run_sweep(const PreparedExperiment& p, const SchedulerOptions& options,
                      RunObserver& observer) {
  const Experiment& first = p.first();
  if (options.isolation == Isolation::none)
    for (const Trial& trial : p.trials)
      if (trial.experiment.distributed.enabled)
        throw Error(trial_name(trial) + " is a [distributed] run, which needs process isolation",
                    "drop --isolate none: the other ranks are forked from the run process before "
                    "it runs any operator, which only a fresh run process guarantees");
  const std::vector<PlannedRun> plan = planned_runs(p, options);

  store::Store::check_writable(options.db);
  // Optional because the connection is closed around every fork.
  std::optional<store::Store> connection(store::Store::open(options.db));
  SweepPlan summary;
  summary.trials = p.trials.size();
  summary.repeats = first.repeats;
  summary.marked_interrupted =
      connection->mark_stale_runs_interrupted() + mark_orphans_interrupted(*connection);
  const auto experiment_id = connection->upsert_experiment(
      first.name, fs::absolute(first.source->path).lexically_normal().string(),
      first.source->text);
  std::vector<std::int64_t> trial_ids;
  for (std::size_t t = 0; t < p.trials.size(); ++t)
    trial_ids.push_back(connection->upsert_trial(
        experiment_id, p.trials[t].experiment.resolved_json(),
        p.trials[t].experiment.config_hash(), p.identities[t], p.trials[t].label));
  const auto existing = existing_runs(p, *connection);
  std::vector<PlannedRun> todo;
  for (const PlannedRun& r : plan)
    if (skip_reason(existing[r.trial], r.repeat, options.policy).empty()) todo.push_back(r);
  summary.to_run = todo.size();
  summary.skipped = plan.size() - todo.size();
  observer.on_plan(summary);

  SweepResult result;
  result.planned = todo.size();
  result.skipped = summary.skipped;
  Interrupts::install();
  const ProcessIdentity me = this_process();
  double spent_s = 0;
  for (const PlannedRun& r : todo) {
    if (Interrupts::count() > 0) break;
    const Trial& trial = p.trials[r.trial];
    store::RunStart start;
    start.trial_id = trial_ids[r.trial];
    start.repeat_index = r.repeat;
    start.kind = trial.experiment.kind;
    start.seed = static_cast<std::int64_t>(run_seed(trial.experiment, r.repeat));
    start.load_average = load_average_1m();
    start.pid = me.pid;
    start.host = me.host;
    start.boot_id = me.boot_id;
    start.pid_start = me.start;
    // Decided again inside the claim: another runner on this store may have
    // run this repetition, or be running it, since the plan was made.
    const auto claimed = connection->claim_run(
        start, p.identities[r.trial], [&](const std::vector<store::TrialRun>& existing) {
          return skip_reason(existing, r.repeat, options.policy).empty();
        });
    if (!claimed) {
      ++result.skipped;
      ++result.taken;
      continue;
    }
    const std::int64_t run_id = *claimed;
    connection->add_plugins(run_id, p.plugins[r.trial]);

    RunStarted started;
    started.run_id = run_id;
    started.trial = &trial;
    started.repeat = r.repeat;
    started.position = result.done + 1;
    started.total = todo.size();
    if (result.done > 0)
      started.eta_s = spent_s / static_cast<double>(result.done) *
                      static_cast<double>(todo.size() - result.done);
    started.failures = result.failures;
    observer.on_run_started(started);

    const auto t0 = Clock::now();
    // time_to_first_step_s: the first run of an invocation counts from the
    // invocation's start (start-up, plugin loading, validation included);
    // later runs from their own start.
    execute(p, options, connection, run_id, r, started, result.done == 0 ? options.start : t0,
            observer);
    spent_s += std::chrono::duration<double>(Clock::now() - t0).count();
    ++result.done;

    RunEnded ended;
    ended.started = started;
    if (auto detail = connection->get_run(run_id)) ended.detail = std::move(*detail);
    const store::RunStatus status = ended.detail.row.status;
    if (status == store::RunStatus::finished) {
      result.consecutive_failures = 0;
    } else if (status != store::RunStatus::interrupted) {
      ++result.failures;
      ++result.consecutive_failures;
    }
    observer.on_run_ended(ended);
    if (options.max_failures > 0 && result.failures >= options.max_failures) {
      result.stop = StopReason::max_failures;
      break;
    }
    if (options.max_consecutive_failures > 0 &&
        result.consecutive_failures >= options.max_consecutive_failures) {
      result.stop = StopReason::consecutive_failures;
      break;
    }
  }
  if (Interrupts::count() > 0) result.stop = StopReason::interrupted;
  return result;
}

}  // namespace runner
