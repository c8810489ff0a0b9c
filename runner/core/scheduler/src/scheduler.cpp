#include "runner/scheduler/scheduler.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "liveness.hpp"
#include "runner/scheduler/auto_repeats.hpp"
#include "record.hpp"
#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/profile.hpp"
#include "runner/fingerprint/fingerprint.hpp"
#include "runner/process/fd.hpp"
#include "runner/process/isolation.hpp"

namespace fs = std::filesystem;

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

// One trial of one of the sweep's experiment files.
struct Slot {
  const PreparedExperiment* experiment = nullptr;
  std::size_t group = 0;  // which experiment file
  std::size_t trial = 0;  // index into experiment->trials
  [[nodiscard]] const Trial& get() const { return experiment->trials[trial]; }
  [[nodiscard]] const std::string& identity() const { return experiment->identities[trial]; }
  /// The environment fingerprint of the identity ("" for an experiment
  /// prepared without one).
  [[nodiscard]] std::string environment() const {
    return trial < experiment->environments.size() ? experiment->environments[trial]
                                                   : std::string();
  }
};

std::vector<Slot> slots_of(const Sweep& sweep) {
  std::vector<Slot> slots;
  for (std::size_t g = 0; g < sweep.size(); ++g)
    for (std::size_t t = 0; t < sweep[g]->trials.size(); ++t) slots.push_back({sweep[g], g, t});
  return slots;
}

// The runs of this invocation, in execution order: repetitions interleaved
// across the trials of every file (A1 B1 A2 B2 ...), restricted to the
// shard. PlannedRun::trial indexes `slots`.
std::vector<PlannedRun> planned_runs(const Sweep& sweep, const std::vector<Slot>& slots,
                                     const SchedulerOptions& options) {
  std::vector<std::int64_t> repeats;
  for (const Slot& slot : slots) repeats.push_back(slot.get().experiment.repeats);
  std::vector<PlannedRun> plan;
  for (const PlannedRun& r : interleave(repeats, options.shuffle,
                                        static_cast<std::uint64_t>(sweep.front()->first().seed)))
    if (in_shard(slots[r.trial].identity(), r.repeat, options.shard)) plan.push_back(r);
  return plan;
}

// Per slot, the slot that runs its repetitions: the first slot, in file
// order, with the same identity. Two files that differ only in their name
// share their trials' runs (a run is of a configuration, not of a file), so
// the later file's repetitions are the earlier's, up to its repeats.
std::vector<std::size_t> owners_of(const std::vector<Slot>& slots) {
  std::vector<std::size_t> owners(slots.size());
  for (std::size_t s = 0; s < slots.size(); ++s) {
    owners[s] = s;
    for (std::size_t o = 0; o < s; ++o)
      if (slots[o].identity() == slots[s].identity()) {
        owners[s] = o;
        break;
      }
  }
  return owners;
}

// Whether repetition `r` of its slot is run by another slot (owners_of).
// --force runs every file's own repetitions: an A/A pair of files.
bool is_shared(const PlannedRun& r, const std::vector<Slot>& slots,
               const std::vector<std::size_t>& owners, ResumePolicy policy) {
  const std::size_t owner = owners[r.trial];
  return policy != ResumePolicy::force && owner != r.trial &&
         r.repeat < slots[owner].get().experiment.repeats;
}

// What the store already holds for every trial (resume matches by identity),
// with runs whose runner process is gone shown as the interrupted runs they
// are (a dry run must not write that down, but must decide the same way).
std::vector<std::vector<store::TrialRun>> existing_runs(const std::vector<Slot>& slots,
                                                        const store::Store& db,
                                                        const Labels& labels) {
  std::set<std::int64_t> gone;
  for (const auto& run : db.running_runs())
    if (liveness_of(run) == Liveness::gone) gone.insert(run.run_id);
  std::vector<std::vector<store::TrialRun>> existing;
  for (const Slot& slot : slots) {
    // Runs at another label set (another commit) are not this one's repetitions.
    existing.push_back(db.runs_of_identity(
        slot.identity(), resolve_labels(slot.get().experiment.labels, labels, ::getenv)));
    for (auto& run : existing.back())
      if (gone.count(run.run_id) != 0) run.status = store::RunStatus::interrupted;
  }
  return existing;
}

// What changed since runs of the same configuration were recorded under
// another identity: the environment fields, else the plugin libraries.
std::vector<std::string> changes_since_recorded(const Slot& slot, const store::Store& db) {
  const auto recorded = db.environments_of_config(slot.get().experiment.config_hash());
  for (const auto& [identity, environment] : recorded) {
    if (identity == slot.identity()) return {};  // runs of this very identity exist
    if (environment.empty())
      return {"the recorded runs predate environments in identities (schema 8)"};
    std::vector<std::string> changes =
        fingerprint_changes(environment, slot.environment());
    if (changes.empty()) changes.emplace_back("plugin libraries");
    return changes;
  }
  return {};
}

// The trial's row, if a run of it recorded it: the experiment row is the
// file's (name and source text, as run_sweep writes it), the trial row its
// identity within that.
std::optional<std::int64_t> recorded_trial_id(const Slot& slot, const store::Store& db) {
  const Experiment& first = slot.experiment->first();
  const auto experiment = db.find_experiment(first.name, first.source->text);
  if (!experiment) return std::nullopt;
  return db.find_trial(*experiment, slot.identity());
}

// A run process's work, shared by the forked and the fresh (exec'd) run
// process: run `body`, record its outcome, and when even recording a failure
// is impossible pass the reason to the scheduler through `reason_fd`.
int run_and_record(const std::filesystem::path& db_path, std::int64_t run_id, int reason_fd,
                   const std::function<RunOutcome(store::Store&)>& body) {
  try {
    store::Store db = store::Store::open(db_path);
    const RunOutcome outcome = body(db);
    record_outcome(db, run_id, outcome);
    return outcome.status == store::RunStatus::finished ? 0 : 3;
  } catch (const std::exception& e) {
    const std::string why = failure_reason(e.what());
    try {
      store::Store::open(db_path).finish_run(run_id, store::RunStatus::failed, why, {}, {});
      return 3;
    } catch (...) {
      (void)write_all(reason_fd, why);
    }
    return 1;
  }
}

// The request a fresh run process reads: enough to prepare the same trial
// again and check that it is the same.
std::string fresh_request(const Slot& slot, const SchedulerOptions& options, std::int64_t run_id,
                          std::int64_t repeat, Clock::time_point origin,
                          const std::optional<Rendezvous>& job) {
  const PreparedExperiment& p = *slot.experiment;
  nlohmann::json request;
  request["db"] = std::filesystem::absolute(options.db).string();
  request["run_id"] = run_id;
  request["file"] = std::filesystem::absolute(p.file).string();
  request["set"] = p.set_overrides;
  std::vector<std::string> extra;
  for (const auto& path : p.search.extra) extra.push_back(std::filesystem::absolute(path).string());
  request["plugin_path"] = extra;
  request["allow_unsafe"] = p.search.allow_unsafe;
  request["trial"] = slot.trial;
  request["repeat"] = repeat;
  request["identity"] = slot.identity();
  request["environment"] = slot.environment();
  request["origin_ns"] =
      std::chrono::duration_cast<std::chrono::nanoseconds>(origin.time_since_epoch()).count();
  if (job)
    request["job"] = {{"rank", job->rank},           {"world_size", job->world_size},
                      {"local_rank", job->local_rank}, {"timeout_ms", job->timeout.count()},
                      {"host", job->host},           {"port", job->port},
                      {"prefix", job->prefix}};
  return request.dump();
}

// In the forked child: becomes the fresh run process (execve of the runner
// with the trial's environment). Returns only when that fails.
int exec_fresh(const Slot& slot, const SchedulerOptions& options, std::int64_t run_id,
               std::int64_t repeat, Clock::time_point origin, const std::optional<Rendezvous>& job,
               int reason_fd, int line_fd) {
  const Experiment& e = slot.get().experiment;
  const std::string request = fresh_request(slot, options, run_id, repeat, origin, job);
  const int memfd = ::memfd_create("runner-run-request", 0);
  if (memfd < 0 || !write_all(memfd, request) || ::lseek(memfd, 0, SEEK_SET) != 0) {
    (void)write_all(reason_fd, std::string("cannot pass the run to a fresh process: ") +
                                   std::strerror(errno));
    return 1;
  }
  for (int fd : {reason_fd, line_fd}) ::fcntl(fd, F_SETFD, 0);  // inherited by the exec
  std::vector<std::string> environment = fresh_process_environment(e.env, e.runtime.allocator);
  const std::string exe = options.executable.string();
  std::vector<std::string> args{"runner", "__run-fresh", std::to_string(memfd),
                                std::to_string(reason_fd), std::to_string(line_fd)};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& v : environment) envp.push_back(v.data());
  envp.push_back(nullptr);
  // SIGINT waits, blocked, until the new image has its handler.
  block_interrupts();
  ::execve(exe.c_str(), argv.data(), envp.data());
  (void)write_all(reason_fd, "cannot start a fresh run process (" + exe +
                                 "): " + std::strerror(errno));
  return 1;
}

// Executes one claimed run and leaves its verdict in the store. With process
// isolation the store connection is closed around the fork: SQLite's locking
// state must never be inherited by a child process.
void execute(const Slot& slot, const SchedulerOptions& options,
             std::optional<store::Store>& connection, std::int64_t run_id, const PlannedRun& r,
             const RunStarted& started, Clock::time_point origin, RunObserver& observer) {
  const Trial& trial = slot.get();
  RunContext context;
  context.db_path = options.db;
  context.run_id = run_id;
  context.trial = &trial;
  context.repeat = r.repeat;
  context.host = slot.experiment->host.get();
  context.origin = origin;
  context.on_progress = [&](const Progress& progress) { observer.on_progress(started, progress); };
  if (options.announce && trial.experiment.kind == RunKind::train &&
      trial.experiment.distributed.enabled) {
    try {
      context.job = options.announce(slot.group, slot.trial, r.repeat, trial);
    } catch (const Error& e) {  // the job cannot go on: this run is left for a resumed one
      (void)connection->mark_interrupted(run_id, std::string("not run: ") + e.what());
      throw;
    }
  }
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
  const bool fresh = !fresh_process_reasons(trial.experiment).empty();
  ChildOptions child;
  child.timeout = std::chrono::duration<double>(trial.experiment.timeout_s);
  child.tick = options.heartbeat;
  child.on_tick = [&] { store::Store::open(options.db).heartbeat(run_id); };
  // A run process that fails outside the engine (a setting LibTorch refuses,
  // a full disk while recording) records its own reason; when even that is
  // impossible it passes the reason to this process through `reason`.
  Pipe reason = make_pipe();
  // A fresh run process reports progress as lines on `lines`; a forked one
  // calls the observer itself.
  Pipe lines = make_pipe();
  if (fresh) {
    child.line_fd = lines.read.get();
    child.on_line = [&](const std::string& line) {
      if (const auto progress = parse_progress_line(line)) observer.on_progress(started, *progress);
    };
  }
  connection.reset();
  const OomKillBaseline oom = OomKillBaseline::take();  // compared once the process ends
  const ChildExit exit = run_in_child(
      [&]() -> int {
        reason.read.reset();
        lines.read.reset();
        if (fresh)
          return exec_fresh(slot, options, run_id, r.repeat, origin, context.job,
                            reason.write.get(), lines.write.get());
        return run_and_record(options.db, run_id, reason.write.get(), [&](store::Store& db) {
          context.db = &db;
          context.stop = &child_stop_flag();
          return options.body(context);
        });
      },
      child);
  reason.write.reset();
  lines.write.reset();
  const std::string why = read_all(reason.read.get());
  connection.emplace(store::Store::open(options.db));
  record_child_exit(*connection, run_id, exit, trial.experiment, context.job, why, oom);
}

}  // namespace

std::vector<std::string> fresh_process_reasons(const Experiment& experiment) {
  return fresh_process_reasons(experiment.env, experiment.runtime.allocator);
}

int serve_fresh_run(int request_fd, int reason_fd, int line_fd) {
  install_child_stop_handler();
  const UniqueFd request_owner(request_fd), reason(reason_fd), lines(line_fd);
  nlohmann::json request;
  try {
    request = nlohmann::json::parse(read_all(request_fd));
  } catch (const std::exception& e) {
    (void)write_all(reason_fd, std::string("the fresh run process got an unreadable request: ") +
                                   e.what());
    return 1;
  }
  const std::filesystem::path db_path = request.value("db", std::string());
  const std::int64_t run_id = request.value("run_id", std::int64_t{0});
  return run_and_record(db_path, run_id, reason_fd, [&](store::Store& db) {
    // The same trial, prepared again from the same file: its identity must
    // be the one the scheduler claimed the run for.
    const auto parsed = parse_experiment_file(request.at("file").get<std::string>(),
                                              request.at("set").get<std::vector<std::string>>());
    PluginSearch search;
    for (const auto& path : request.at("plugin_path").get<std::vector<std::string>>())
      search.extra.emplace_back(path);
    search.allow_unsafe = request.at("allow_unsafe").get<bool>();
    PluginHost host;
    std::vector<std::string> warnings;
    load_plugins(host, plugin_paths_of(*parsed), search, warnings);
    const std::vector<Trial> trials = expand_trials(*parsed, host);
    const auto index = request.at("trial").get<std::size_t>();
    if (index >= trials.size())
      throw Error("the experiment file changed after the sweep was planned: it has " +
                      std::to_string(trials.size()) + " trial(s) now",
                  "run the sweep again", ErrorKind::run);
    const Trial& trial = trials[index];
    const std::string environment = request.at("environment").get<std::string>();
    const std::string identity = trial_identity(
        trial.experiment.config_hash(), plugin_records(host, trial.experiment),
        environment.empty() ? std::string() : sha256_hex(environment));
    if (identity != request.at("identity").get<std::string>())
      throw Error("the experiment file or its plugins changed after the sweep was planned (" +
                      trial_name(trial) + " is no longer the trial this run was claimed for)",
                  "run the sweep again", ErrorKind::run);
    RunContext context;
    context.db = &db;
    context.db_path = db_path;
    context.run_id = run_id;
    context.trial = &trial;
    context.repeat = request.at("repeat").get<std::int64_t>();
    context.host = &host;
    context.stop = &child_stop_flag();
    context.origin = Clock::time_point(std::chrono::duration_cast<Clock::duration>(
        std::chrono::nanoseconds(request.at("origin_ns").get<std::int64_t>())));
    context.on_progress = [&](const Progress& progress) {
      (void)write_all(line_fd, progress_line(progress));
    };
    if (request.contains("job")) {
      const nlohmann::json& j = request.at("job");
      Rendezvous job;
      job.rank = j.at("rank").get<int>();
      job.world_size = j.at("world_size").get<int>();
      job.local_rank = j.at("local_rank").get<int>();
      job.timeout = std::chrono::milliseconds(j.at("timeout_ms").get<std::int64_t>());
      job.host = j.at("host").get<std::string>();
      job.port = j.at("port").get<int>();
      job.prefix = j.at("prefix").get<std::string>();
      context.job = job;
    }
    return execute_recorded_run(context);
  });
}

std::vector<PlannedAction> plan_sweep(const PreparedExperiment& p,
                                      const SchedulerOptions& options) {
  return plan_sweep(Sweep{&p}, options);
}

std::vector<PlannedAction> plan_sweep(const Sweep& sweep, const SchedulerOptions& options) {
  check_auto_repeats(sweep, options.shard);
  const std::vector<Slot> slots = slots_of(sweep);
  std::vector<std::vector<store::TrialRun>> existing(slots.size());
  // Nothing recorded yet: no file, or one that a runner started beside this
  // one has created but not yet given its schema.
  const std::optional<store::Store> db = store::Store::open_read_only_if_recorded(options.db);
  if (db) existing = existing_runs(slots, *db, options.labels);
  // What changed since the recorded runs is a property of the trial: looked
  // up once per trial, not once per repetition.
  std::vector<std::optional<std::vector<std::string>>> changes(slots.size());
  const std::vector<std::size_t> owners = owners_of(slots);
  std::vector<PlannedAction> actions;
  for (const PlannedRun& r : planned_runs(sweep, slots, options)) {
    PlannedAction action;
    action.run = {slots[r.trial].trial, r.repeat};
    action.experiment = slots[r.trial].group;
    if (is_shared(r, slots, owners, options.policy)) {
      const Slot& owner = slots[owners[r.trial]];
      action.shared_with = std::pair{owner.group, owner.trial};
      action.skip_reason = "shared";
    } else {
      action.skip_reason = skip_reason(existing[r.trial], r.repeat, options.policy);
    }
    if (action.skip_reason.empty() && db) {
      if (!changes[r.trial]) changes[r.trial] = changes_since_recorded(slots[r.trial], *db);
      action.changes = *changes[r.trial];
    }
    if (db) action.trial_id = recorded_trial_id(slots[r.trial], *db);
    actions.push_back(std::move(action));
  }
  return actions;
}

std::vector<std::optional<std::int64_t>> recorded_trial_ids(const PreparedExperiment& p,
                                                            const std::filesystem::path& db_path) {
  std::vector<std::optional<std::int64_t>> ids(p.trials.size());
  const std::optional<store::Store> db = store::Store::open_read_only_if_recorded(db_path);
  if (!db) return ids;
  for (std::size_t t = 0; t < p.trials.size(); ++t) ids[t] = recorded_trial_id(Slot{&p, 0, t}, *db);
  return ids;
}

SweepResult run_sweep(const PreparedExperiment& p, const SchedulerOptions& options,
                      RunObserver& observer) {
  return run_sweep(Sweep{&p}, options, observer);
}

SweepResult run_sweep(const Sweep& sweep, const SchedulerOptions& options,
                      RunObserver& observer) {
  check_auto_repeats(sweep, options.shard);
  const std::vector<Slot> slots = slots_of(sweep);
  if (options.isolation == Isolation::none)
    for (const Slot& slot : slots) {
      const Trial& trial = slot.get();
      if (trial.experiment.distributed.enabled)
        throw Error(trial_name(trial) + " is a [distributed] run, which needs process isolation",
                    "drop --isolate none: the other ranks are forked from the run process before "
                    "it runs any operator, which only a fresh run process guarantees");
      const auto reasons = fresh_process_reasons(trial.experiment);
      if (!reasons.empty())
        throw Error(trial_name(trial) + " needs a run process with its own environment (" +
                        join(reasons, ", ") + "), which --isolate none cannot give it",
                    "drop --isolate none, or set the variables in the shell that starts runner");
    }
  const std::vector<PlannedRun> plan = planned_runs(sweep, slots, options);

  store::Store::check_writable(options.db);
  // Before anything is written: a profiled run's trace must have a place.
  if (std::any_of(slots.begin(), slots.end(), [](const Slot& slot) {
        const Experiment& e = slot.get().experiment;
        return e.profile.enabled() && e.kind != RunKind::kernel;
      }))
    prepare_trace_directory(options.db);
  // Optional because the connection is closed around every fork.
  std::optional<store::Store> connection(store::Store::open(options.db));
  SweepPlan summary;
  summary.trials = slots.size();
  summary.experiments = sweep.size();
  for (const PreparedExperiment* p : sweep)
    summary.repeats = std::max(summary.repeats, p->first().repeats);
  summary.marked_interrupted =
      connection->mark_stale_runs_interrupted() + mark_orphans_interrupted(*connection);
  std::vector<std::int64_t> trial_ids;
  for (const PreparedExperiment* p : sweep) {
    const Experiment& first = p->first();
    const auto experiment_id =
        options.experiment_id
            ? *options.experiment_id
            : connection->upsert_experiment(
                  first.name, fs::absolute(first.source->path).lexically_normal().string(),
                  first.source->text);
    for (std::size_t t = 0; t < p->trials.size(); ++t)
      trial_ids.push_back(connection->upsert_trial(
          experiment_id, p->trials[t].experiment.resolved_json(),
          p->trials[t].experiment.config_hash(), p->identities[t], p->trials[t].label,
          Slot{p, 0, t}.environment()));
  }
  const auto existing = existing_runs(slots, *connection, options.labels);
  const std::vector<std::size_t> owners = owners_of(slots);
  std::vector<PlannedRun> todo;
  for (const PlannedRun& r : plan)
    if (is_shared(r, slots, owners, options.policy))
      ++summary.shared;
    else if (skip_reason(existing[r.trial], r.repeat, options.policy).empty())
      todo.push_back(r);
  summary.to_run = todo.size();
  summary.skipped = plan.size() - todo.size() - summary.shared;
  observer.on_plan(summary);

  SweepResult result;
  result.planned = todo.size();
  result.skipped = summary.skipped;
  result.shared = summary.shared;
  Interrupts::install();
  const ProcessIdentity me = this_process();
  double spent_s = 0;
  // repeats = "auto": the runs are the rounds up to max_repeats, judged before each.
  std::optional<AutoRounds> rounds;
  if (is_auto(sweep)) rounds.emplace(sweep, options.start, observer);
  for (const PlannedRun& r : todo) {
    if (Interrupts::count() > 0) break;
    if (rounds && rounds->stop_before(r.repeat, *connection)) break;
    const Slot& slot = slots[r.trial];
    const Trial& trial = slot.get();
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
    start.labels = resolve_labels(trial.experiment.labels, options.labels, ::getenv);
    // Decided again inside the claim: another runner on this store may have
    // run this repetition, or be running it, since the plan was made.
    const auto claimed = connection->claim_run(
        start, slot.identity(), [&](const std::vector<store::TrialRun>& existing) {
          return skip_reason(existing, r.repeat, options.policy).empty();
        });
    if (!claimed) {
      ++result.skipped;
      ++result.taken;
      continue;
    }
    const std::int64_t run_id = *claimed;
    connection->add_plugins(run_id, slot.experiment->plugins[slot.trial]);

    RunStarted started;
    started.run_id = run_id;
    started.trial = &trial;
    started.trial_id = trial_ids[r.trial];
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
    execute(slot, options, connection, run_id, r, started, result.done == 0 ? options.start : t0,
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
  if (rounds && result.stop == StopReason::none) result.auto_stop = rounds->finish(*connection);
  return result;
}

}  // namespace runner
