// runner run FILE...: check everything, then run every repetition of every
// trial (each in a child process by default) and record it; what `rerun` and
// `validate` share with it is declared in running.hpp.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>

#include "commands.hpp"
#include "implied_comparisons.hpp"
#include "running.hpp"
#include "shared_trials.hpp"
#include "table.hpp"
#include "trial_names.hpp"
#include "runner/common/error.hpp"
#include "runner/common/labels.hpp"
#include "runner/common/strings.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "runner/process/isolation.hpp"
#include "runner/scheduler/auto_repeats.hpp"
#include "runner/scheduler/job.hpp"
#include "runner/scheduler/scheduler.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace fs = std::filesystem;

namespace runner::cli {

namespace {
PluginSearch search_of(const Global& global) {
  return PluginSearch{global.plugin_paths, global.allow_unsafe_plugins};
}
}  // namespace

void load_plugins(PluginHost& host, const std::vector<fs::path>& experiment_paths,
                  const Global& global) {
  std::vector<std::string> warnings;
  runner::load_plugins(host, experiment_paths, search_of(global), warnings);
  for (const auto& w : warnings) spdlog::warn("{}", w);
}

namespace {

const store::Summary* find_summary(const std::vector<store::Summary>& all, const std::string& m) {
  for (const auto& s : all)
    if (s.metric == m) return &s;
  return nullptr;
}

double find_metric(const std::vector<store::Metric>& all, const std::string& name) {
  for (const auto& m : all)
    if (m.name == name) return m.value;
  return std::nan("");
}

// The end-of-sweep table's columns for an experiment kind, after the trial's.
std::vector<std::string> columns(RunKind kind) {
  switch (kind) {
    case RunKind::train:
      // "loss (last 10)": the mean of the last 10 measured steps, as the
      // progress line shows it (loss_final).
      return {"repeat", "status", "step p50", "step p90", "samples/s", "loss (last 10)"};
    case RunKind::infer:
      return {"repeat", "status", "latency p50", "p90", "p99", "samples/s"};
    case RunKind::kernel:
      return {"repeat", "status", "call p50", "p90", "GB/s", "of copy BW", "max rel err"};
  }
  return {};
}

// Every trial of the schedule, for the keys that tell them apart.
std::vector<const Trial*> trials_of(const Sweep& sweep) {
  std::vector<const Trial*> out;
  for (const PreparedExperiment* p : sweep)
    for (const Trial& t : p->trials) out.push_back(&t);
  return out;
}

// A summary's quantile, or "-" for a run that measured no step (one that
// diverged or failed during its warm-up).
std::string quantile_cell(const store::Summary* summary, double store::Summary::*field) {
  return summary != nullptr && summary->n > 0 ? format_ns(summary->*field) : "-";
}

// Prints what the scheduler does: a progress line per run (rewritten in
// place on a terminal), an error line per failed run, a table at the end.
class PrintingObserver final : public RunObserver {
 public:
  PrintingObserver(const Sweep& sweep, const SchedulerOptions& options, const Global& global)
      : sweep_(sweep), options_(options), global_(global), kind_(sweep.front()->first().kind),
        terminal_(::isatty(STDERR_FILENO) == 1), keys_(distinguishing_keys(trials_of(sweep))),
        table_(sweep.size() > 1 ? std::vector<std::string>{"run", "experiment"}
                                : std::vector<std::string>{"run"},
               columns(kind_), keys_) {}

  void on_plan(const SweepPlan& plan) override {
    if (plan.marked_interrupted > 0)
      spdlog::warn("{} run(s) left running by a runner that stopped were marked interrupted",
                   plan.marked_interrupted);
    spdlog::info("{} ({}): {} trial(s) x {} repetition(s); {} to run, {} already "
                 "done{}; database {}",
                 experiment_names(), to_string(sweep_.front()->first().kind), plan.trials,
                 plan.repeats, plan.to_run, plan.skipped,
                 plan.shared > 0 ? ", " + std::to_string(plan.shared) + " shared" : "",
                 global_.db.string());
    if (sweep_.size() > 1)
      spdlog::info("one schedule for {} experiment files: their runs are interleaved",
                   sweep_.size());
    for (const std::string& line : sharing_lines(sweep_, planned_trials(), options_))
      spdlog::info("{}", line);
    for (const std::string& line : decidability_lines(sweep_)) spdlog::info("{}", line);
    for (const PreparedExperiment* p : sweep_)
      if (p->first().auto_repeats) spdlog::info("{}", auto_repeats_line(*p));
  }

  void on_round_look(std::int64_t /*round*/, const std::string& finding) override {
    spdlog::info("repeats = \"auto\": {}", finding);
  }

  void on_run_started(const RunStarted& run) override {
    run_start_ = std::chrono::steady_clock::now();
    prefix_ = "[" + std::to_string(run.position) + "/" + std::to_string(run.total) + "] run " +
              std::to_string(run.run_id) + " " +
              (sweep_.size() > 1 ? run.trial->experiment.name + " " : std::string()) +
              reference(run) + " repeat " + std::to_string(run.repeat);
  }

  void on_progress(const RunStarted& run, const Progress& p) override {
    std::string line = prefix_;
    if (const auto eta = eta_s(run, p)) line += " eta " + format_duration(*eta);
    if (run.failures) line += " failures " + std::to_string(run.failures);
    line += (kind_ == RunKind::kernel ? " call " : " step ") + std::to_string(p.step) + "/" +
            std::to_string(p.total_steps);
    // The mean of the last 10 steps, the quantity of the table's column.
    if (!std::isnan(p.last_loss)) line += "  loss (last 10) " + format_number(p.last_loss);
    // How much of the recent steps went to waiting for data (docs/data.md).
    if (!std::isnan(p.data_share))
      line += "  data wait " + format_number(std::round(p.data_share * 1000) / 10) + "%";
    line += "  " + format_number(p.steps_per_s) + (kind_ == RunKind::kernel ? " calls/s" : " steps/s");
    if (terminal_) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else {
      spdlog::info("{}", line);
    }
  }

  void on_run_ended(const RunEnded& run) override {
    if (terminal_) std::cerr << "\r\033[K" << std::flush;
    const auto now = std::chrono::steady_clock::now();
    spent_s_ += std::chrono::duration<double>(now - run_start_).count();
    ++ended_;
    const store::RunDetail& detail = run.detail;
    const Trial& trial = *run.started.trial;
    const std::string status = to_string(detail.row.status);
    if (detail.row.status != store::RunStatus::finished &&
        detail.row.status != store::RunStatus::interrupted)
      spdlog::error("run {} ({}, repeat {}) {}: {}", run.started.run_id, reference(run.started),
                    run.started.repeat, status, terminal_safe(detail.error));
    const store::Summary* wall = find_summary(detail.summaries, headline_metric(kind_));
    if (wall != nullptr)
      if (const std::string noisy = store::noise_warning(*wall); !noisy.empty())
        spdlog::warn("run {}: {}", run.started.run_id, noisy);
    // Profiled steps ([profile], docs/profiling.md) are slowed down by the
    // profiler: the run says they are left out, and where the trace is.
    if (const double profiled = find_metric(detail.metrics, "profiled_steps"); profiled > 0) {
      std::string trace;
      for (const auto& f : detail.files)
        if (f.role == "profile_trace") trace = f.path;
      spdlog::info("run {}: {} profiled step(s) left out of the statistics; trace {} (runner show {} "
                   "--ops)",
                   run.started.run_id, format_number(profiled), trace.empty() ? "-" : trace,
                   run.started.run_id);
    }
    std::vector<std::string> before{std::to_string(run.started.run_id)};
    if (sweep_.size() > 1) before.push_back(trial.experiment.name);
    const std::string repeat = std::to_string(run.started.repeat);
    // A diverged run says where instead of statistics it does not have.
    const std::string shown_status = detail.row.status == store::RunStatus::diverged &&
                                             !detail.error.empty()
                                         ? status + " (" + detail.error + ")"
                                         : status;
    std::vector<std::string> after{repeat, shown_status, quantile_cell(wall, &store::Summary::p50),
                                   quantile_cell(wall, &store::Summary::p90)};
    if (kind_ == RunKind::train) {
      after.push_back(format_number(find_metric(detail.metrics, "samples_per_s")));
      after.push_back(format_number(find_metric(detail.metrics, "loss_final")));
    } else if (kind_ == RunKind::kernel) {
      const double bandwidth = find_metric(detail.metrics, "bandwidth_bytes_per_s");
      const double share = find_metric(detail.metrics, "fraction_of_peak_bandwidth");
      after.push_back(std::isnan(bandwidth) ? "-" : format_number(bandwidth / 1e9));
      after.push_back(std::isnan(share) ? "-" : format_number(100 * share) + " %");
      after.push_back(format_number(find_metric(detail.metrics, "max_rel_error")));
    } else {
      after.push_back(quantile_cell(wall, &store::Summary::p99));
      after.push_back(format_number(find_metric(detail.metrics, "samples_per_s")));
    }
    table_.add(std::move(before), trial, std::to_string(run.started.trial_id), std::move(after));
  }

  /// The summary after the sweep; returns the exit code.
  int finish(const SweepResult& result, const SchedulerOptions& options) {
    switch (result.stop) {
      case StopReason::max_failures:
        spdlog::error("stopping: {} failed run(s) reached --max-failures {}", result.failures,
                      options.max_failures);
        break;
      case StopReason::consecutive_failures:
        spdlog::error("stopping: {} consecutive failed runs (--max-consecutive-failures {}); "
                      "the machine or the setup is probably broken",
                      result.consecutive_failures, options.max_consecutive_failures);
        break;
      default:
        break;
    }
    std::size_t trials = 0;
    for (const PreparedExperiment* p : sweep_) trials += p->trials.size();
    std::cout << "\n" << join(names(), ", ") << " (" << to_string(sweep_.front()->first().kind)
              << ", " << trials << " trial(s), " << result.done << " run(s) now, "
              << result.skipped << " skipped as done"
              << (result.shared > 0 ? ", " + std::to_string(result.shared) + " shared" : "")
              << ")\n";
    if (!table_.empty()) {
      table_.print(std::cout, terminal_width());
      std::cout << trial_column_note() << "\n";
    }
    std::cout << "recorded in " << global_.db.string() << "\n";
    if (!result.auto_stop.empty()) std::cout << "repeats = \"auto\": " << result.auto_stop << "\n";
    if (result.stop == StopReason::interrupted) {
      spdlog::warn("interrupted: {} of {} runs done; run the same command again to resume",
                   result.done, result.planned);
      return 128 + SIGINT;
    }
    if (result.stop != StopReason::none) return kExitRunFailed;
    return result.failures == 0 ? kExitOk : kExitRunFailed;
  }

 private:
  // The experiments of the schedule, in file order.
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const PreparedExperiment* p : sweep_) out.push_back(p->first().name);
    return out;
  }
  // "experiment 'quickstart'", or "experiments 'a', 'b'" for several files.
  [[nodiscard]] std::string experiment_names() const {
    std::vector<std::string> quoted;
    for (const auto& n : names()) quoted.push_back("'" + n + "'");
    return (sweep_.size() > 1 ? "experiments " : "experiment ") + join(quoted, ", ");
  }

  // The trials as the plan has them, with their rows (recorded by now):
  // planned again only where an earlier file may share them, the one case
  // that needs the whole plan.
  [[nodiscard]] std::vector<PlannedAction> planned_trials() const {
    if (sweep_.size() > 1) return plan_sweep(sweep_, options_);
    std::vector<PlannedAction> out;
    const auto ids = recorded_trial_ids(*sweep_.front(), global_.db);
    for (std::size_t t = 0; t < ids.size(); ++t) {
      PlannedAction action;
      action.run.trial = t;
      action.trial_id = ids[t];
      out.push_back(std::move(action));
    }
    return out;
  }

  // "trial:2", and the keys that tell it from the others ("trial:2
  // (train.precision=bf16)").
  [[nodiscard]] std::string reference(const RunStarted& run) const {
    const std::string label = short_label(*run.trial, keys_);
    return "trial:" + std::to_string(run.trial_id) + (label.empty() ? "" : " (" + label + ")");
  }

  // Time left: the rest of this run at its recent pace, and the runs after
  // it at the pace of those done (this one's, estimated, before any is).
  [[nodiscard]] std::optional<double> eta_s(const RunStarted& run, const Progress& p) const {
    if (!(p.steps_per_s > 0)) return run.eta_s;
    const double left_in_run = static_cast<double>(p.total_steps - p.step) / p.steps_per_s;
    const double per_run =
        ended_ > 0 ? spent_s_ / static_cast<double>(ended_)
                   : std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_)
                             .count() + left_in_run;
    return left_in_run + static_cast<double>(run.total - run.position) * per_run;
  }

  Sweep sweep_;
  const SchedulerOptions& options_;
  const Global& global_;
  RunKind kind_;
  bool terminal_;
  std::vector<std::string> keys_;  // the keys that tell the trials apart
  TrialTable table_;
  std::string prefix_;
  std::chrono::steady_clock::time_point run_start_;
  double spent_s_ = 0;             // wall time of the runs ended so far
  std::int64_t ended_ = 0;
};

// The recorded row of a trial of the plan, if any of its actions has one.
std::optional<std::int64_t> actions_trial_id(const std::vector<PlannedAction>& actions,
                                             std::size_t file, std::size_t trial) {
  for (const PlannedAction& a : actions)
    if (a.experiment == file && a.run.trial == trial && a.trial_id) return a.trial_id;
  return std::nullopt;
}

int print_dry_run(const Sweep& sweep, const SchedulerOptions& options) {
  TrialTable table(sweep.size() > 1 ? std::vector<std::string>{"#", "experiment"}
                                    : std::vector<std::string>{"#"},
                   {"repeat", "action"}, distinguishing_keys(trials_of(sweep)));
  bool any_new = false;
  std::int64_t to_run = 0;
  std::int64_t shared = 0;
  const std::vector<PlannedAction> actions = plan_sweep(sweep, options);
  // What changed since the recorded runs, once per trial.
  std::vector<std::pair<std::string, std::vector<std::string>>> changed;
  std::set<std::pair<std::size_t, std::size_t>> seen;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const PlannedAction& action = actions[i];
    const PreparedExperiment& p = *sweep[action.experiment];
    const Trial& trial = p.trials[action.run.trial];
    const std::string name = (sweep.size() > 1 ? p.first().name + " " : std::string()) +
                             trial_reference(trial, action.trial_id);
    any_new = any_new || !action.trial_id;
    const std::string& reason = action.skip_reason;
    to_run += reason.empty() ? 1 : 0;
    std::string what = reason.empty() ? "run" : "skip: " + reason;
    if (action.shared_with) {
      const auto [file, with] = *action.shared_with;
      what = "shared: " + sweep[file]->first().name + "'s " +
             trial_reference(sweep[file]->trials[with], actions_trial_id(actions, file, with)) +
             " runs it";
      ++shared;
    }
    if (reason.empty() && !action.changes.empty()) what += " (changed since the recorded runs)";
    if (reason.empty() && !fresh_process_reasons(trial.experiment).empty())
      what += " [fresh process]";
    std::vector<std::string> before{std::to_string(i + 1)};
    if (sweep.size() > 1) before.push_back(p.first().name);
    table.add(std::move(before), trial, trial_cell(trial, action.trial_id),
              {std::to_string(action.run.repeat), what});
    if (!action.changes.empty() && seen.insert({action.experiment, action.run.trial}).second)
      changed.emplace_back(name, action.changes);
  }
  table.print(std::cout, terminal_width());
  std::cout << trial_column_note()
            << (any_new ? "\n#K (new): the file's K-th trial, not recorded yet" : "") << "\n";
  for (const std::string& line : sharing_lines(sweep, actions, options))
    std::cout << line << "\n";
  for (const auto& [name, changes] : changed) {
    std::cout << name << ": runs of the same configuration are recorded under another "
              << "environment; changed since:\n";
    for (const auto& change : changes) std::cout << "  " << change << "\n";
  }
  std::cout << to_run << " of " << actions.size() << " runs would run";
  if (shared > 0) std::cout << ", " << shared << " shared";
  if (options.shard.count > 1)
    std::cout << " (shard " << options.shard.index << "/" << options.shard.count << ")";
  std::cout << "; nothing was written\n";
  for (const PreparedExperiment* p : sweep)
    if (p->first().auto_repeats)
      std::cout << auto_repeats_line(*p) << " (the runs above are its most)\n";
  // A sweep is there to compare its trials: say whether the planned
  // repetitions can decide that, and each comparison the file's comments
  // suggest (docs/method.md).
  for (const std::string& line : decidability_lines(sweep)) std::cout << line << "\n";
  return kExitOk;
}

// Under a launcher every [distributed] trial runs on the launcher's ranks:
// its world size must be the job's. Returns the longest rendezvous timeout.
std::chrono::milliseconds check_job(const Sweep& sweep, const JobEnvironment& job) {
  double timeout_s = 0.0;
  for (const PreparedExperiment* p : sweep)
    for (const Trial& t : p->trials) {
      const Experiment& e = t.experiment;
      if (e.kind != RunKind::train || !e.distributed.enabled) continue;
      timeout_s = std::max(timeout_s, e.distributed.timeout_s);
      if (e.distributed.world_size != job.world_size)
        throw Error(e.where_of("distributed.world_size"),
                    trial_name(t) + " has distributed.world_size = " +
                        std::to_string(e.distributed.world_size) + ", but the launched job has " +
                        std::to_string(job.world_size) + " ranks (WORLD_SIZE)",
                    "set world_size to the job's size (--set distributed.world_size=" +
                        std::to_string(job.world_size) + ")");
    }
  if (timeout_s == 0.0) timeout_s = 60.0;  // no [distributed] trial: the default
  return std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000.0));
}

int run_experiments(const std::vector<std::string>& files, const Global& global,
                    const RunFlags& flags) {
  // torchrun, a SLURM step or a PyTorchJob: join the job instead of
  // starting ranks (see docs/distributed.md).
  const std::optional<JobEnvironment> job = job_environment(
      [](const char* name) -> const char* { return std::getenv(name); });
  const bool follower = job && job->rank != 0;
  // A database that cannot be written is known before any plugin is loaded.
  if (!flags.dry_run && !follower) store::Store::check_writable(global.db);
  // Every file is checked before anything runs. The kinds must agree: one
  // summary table, and comparisons across files are of like with like.
  std::vector<PreparedExperiment> prepared;
  for (const std::string& file : files) {
    prepared.push_back(prepare(file, global, flags.set));
    const Experiment& first = prepared.front().first();
    const Experiment& now = prepared.back().first();
    if (now.kind != first.kind)
      throw Error(file + " is a " + to_string(now.kind) + " experiment, but " + files.front() +
                      " is a " + to_string(first.kind) + " one",
                  "run experiments of one kind in one schedule");
    for (std::size_t i = 0; i + 1 < prepared.size(); ++i)
      if (prepared[i].first().name == now.name)
        throw Error(file + " and " + files[i] + " are both experiment '" + now.name + "'",
                    "give each file of one schedule a distinct [experiment] name: each is "
                    "recorded under its own");
  }
  Sweep sweep;
  for (const PreparedExperiment& p : prepared) sweep.push_back(&p);
  // A bad label (say, $GITHUB_SHA) is known before anything is written; the
  // scheduler resolves the same labels again for each run it records.
  for (const PreparedExperiment& p : prepared) {
    const Labels labels = resolve_labels(p.first().labels, flags.options.labels, ::getenv);
    if (!labels.empty() && !flags.dry_run && !follower)
      spdlog::info("{}: runs labelled {}", p.first().name, labels_text(labels));
  }
  const std::chrono::milliseconds job_timeout =
      job ? check_job(sweep, *job) : std::chrono::milliseconds(0);
  if (flags.dry_run) return print_dry_run(sweep, flags.options);
  if (follower) {
    // Ranks 1..N-1 open no database: they join the runs rank 0 announces.
    Interrupts::install();
    const int code = follow_job(*job, sweep, job_timeout,
                                [](const std::string& line) { spdlog::info("{}", line); },
                                &Interrupts::flag());
    return code == 0 ? kExitOk : code == 130 ? 130 : code == 2 ? kExitBadInput : kExitRunFailed;
  }
  SchedulerOptions options = flags.options;
  std::optional<JobAnnouncer> announcer;
  if (job) {
    announcer.emplace(*job, job_timeout);
    spdlog::info("rank 0 of {}: serving the job's rendezvous at {}:{}", job->world_size,
                 job->master_addr, job->master_port);
    options.announce = [&announcer](std::size_t experiment, std::size_t trial,
                                     std::int64_t repeat, const Trial& which) {
      return announcer->announce(experiment, trial, repeat, which);
    };
  }
  return run_printing(sweep, options, global);
}

int handle_run(const Args& args, const Global& global) {
  return run_experiments(args.positionals, global, run_flags(args, global));
}

}  // namespace

RunFlags run_flags(const Args& args, const Global& global) {
  RunFlags f;
  if (auto it = args.values.find("--set"); it != args.values.end()) f.set = it->second;
  const std::string isolate = args.get("--isolate", "process");
  if (isolate != "process" && isolate != "none")
    throw Error("--isolate must be 'process' or 'none', found '" + isolate + "'");
  SchedulerOptions& o = f.options;
  o.db = global.db;
  o.start = global.start;
  o.isolation = isolate == "process" ? Isolation::process : Isolation::none;
  f.dry_run = args.has("--dry-run");
  o.shuffle = args.has("--shuffle");
  if (args.has("--force") && args.has("--rerun-failed"))
    throw Error("--force and --rerun-failed exclude each other",
                "--force reruns everything; --rerun-failed only what failed");
  if (args.has("--force")) o.policy = ResumePolicy::force;
  if (args.has("--rerun-failed")) o.policy = ResumePolicy::rerun_failed;
  if (args.has("--max-failures"))
    o.max_failures = parse_integer(args.get("--max-failures"), "--max-failures", 0);
  if (args.has("--max-consecutive-failures"))
    o.max_consecutive_failures =
        parse_integer(args.get("--max-consecutive-failures"), "--max-consecutive-failures", 0);
  if (args.has("--shard")) o.shard = parse_shard(args.get("--shard"));
  if (auto it = args.values.find("--label"); it != args.values.end())
    for (const std::string& argument : it->second) {
      auto [key, value] = parse_label_argument(argument);
      if (const auto [at, added] = o.labels.emplace(key, value); !added)
        throw Error("--label " + key + " is given twice ('" + terminal_safe(at->second) +
                        "', then '" + terminal_safe(value) + "')",
                    "give each label once");
    }
  return f;
}

PreparedExperiment prepare(const fs::path& file, const Global& global,
                           const std::vector<std::string>& set) {
  PreparedExperiment p = prepare_experiment(file, set, search_of(global));
  for (const auto& w : p.warnings) spdlog::warn("{}", w);
  return p;
}

int run_printing(const Sweep& sweep, const SchedulerOptions& options, const Global& global) {
  PrintingObserver observer(sweep, options, global);
  const SweepResult result = run_sweep(sweep, options, observer);
  return observer.finish(result, options);
}

Command run_command() {
  CommandDef def;
  def.name = "run";
  def.summary = "run an experiment's trials and record every run in the database";
  def.usage = "runner run FILE [FILE...] [options]";
  def.positionals = {"FILE"};
  def.variadic = true;
  def.options = {
      {"--set", "KEY=VALUE", "override a dotted key of the file (e.g. train.steps=50)", true},
      {"--dry-run", "", "print the runs that would run or be skipped; write nothing", false},
      {"--rerun-failed", "", "also rerun failed, crashed, timed-out and diverged runs", false},
      {"--force", "", "rerun every run, even finished ones", false},
      {"--isolate", "MODE", "process (default: each run in a child process) or none", false},
      {"--shuffle", "", "shuffle the trial order of every round (seeded)", false},
      {"--max-failures", "N", "stop after N failed runs (default 0: no limit)", false},
      {"--max-consecutive-failures", "K", "stop after K failures in a row (default 5; 0: off)",
       false},
      {"--shard", "K/N", "run only shard K of N (deterministic; merge with 'runner merge')",
       false},
      {"--label", "KEY=VALUE",
       "record a label with every run (e.g. commit=abc123); over [experiment] labels", true},
  };
  def.details =
      "Everything is checked before anything is written: a bad file, an unknown plugin,\n"
      "a bad option or an unwritable database exits 2 and leaves the database untouched.\n"
      "Runs already recorded for the same trial (same resolved configuration, plugin\n"
      "files and environment: library versions, CPU, performance variables) are skipped,\n"
      "so the same command resumes an interrupted sweep; --dry-run says what changed.\n"
      "Several files run as one interleaved schedule (A1 B1 A2 B2 ...), each recorded\n"
      "under its own experiment: compare them with 'runner compare experiment:A experiment:B'.\n"
      "A trial whose [env] or allocator differs from runner's own runs in a fresh process.\n"
      "Labels (--label, [experiment] labels) describe runs without changing their identity;\n"
      "commit comes from $RUNNER_LABEL_COMMIT, $GITHUB_SHA or $CI_COMMIT_SHA when not given.\n"
      "Ctrl-C stops the current run cleanly (interrupted); a second Ctrl-C kills it.\n"
      "Exit codes: 0 all runs finished, 1 a run failed, 2 bad input or usage, 130 interrupted.";
  return {def, &handle_run};
}

}  // namespace runner::cli
