// runner run FILE / runner validate FILE: check everything, then run every
// repetition of every trial (each in a child process by default) and record it.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "commands.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/sha256.hpp"
#include "runner/engine/engine.hpp"
#include "runner/process/isolation.hpp"
#include "runner/scheduler/plan.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/fingerprint/fingerprint.hpp"
#include "runner/host/host.hpp"
#include "runner/store/stats.hpp"
#include "runner/store/store.hpp"

namespace fs = std::filesystem;

namespace runner::cli {

void load_plugins(PluginHost& host, const std::vector<fs::path>& experiment_paths,
                  const Global& global) {
  for (const auto& p : default_plugin_paths()) {
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      spdlog::warn("plugin path '{}' (RUNNER_PLUGIN_PATH) does not exist; skipped", p.string());
      continue;
    }
    host.load(p);
  }
  for (const auto& p : experiment_paths) host.load(p);
  for (const auto& p : global.plugin_paths) host.load(p);
}

namespace {

// Flags of `run` beyond the common ones.
struct RunFlags {
  std::vector<std::string> set;
  bool isolate = true;
  bool dry_run = false;
  bool shuffle = false;
  ResumePolicy policy = ResumePolicy::missing;
  std::int64_t max_failures = 0;              // 0: no limit
  std::int64_t max_consecutive_failures = 5;  // 0: no limit
  Shard shard;
};

RunFlags run_flags(const Args& args) {
  RunFlags f;
  if (auto it = args.values.find("--set"); it != args.values.end()) f.set = it->second;
  const std::string isolate = args.get("--isolate", "process");
  if (isolate != "process" && isolate != "none")
    throw Error("--isolate must be 'process' or 'none', found '" + isolate + "'");
  f.isolate = isolate == "process";
  f.dry_run = args.has("--dry-run");
  f.shuffle = args.has("--shuffle");
  if (args.has("--force") && args.has("--rerun-failed"))
    throw Error("--force and --rerun-failed exclude each other",
                "--force reruns everything; --rerun-failed only what failed");
  if (args.has("--force")) f.policy = ResumePolicy::force;
  if (args.has("--rerun-failed")) f.policy = ResumePolicy::rerun_failed;
  if (args.has("--max-failures"))
    f.max_failures = parse_integer(args.get("--max-failures"), "--max-failures", 0);
  if (args.has("--max-consecutive-failures"))
    f.max_consecutive_failures =
        parse_integer(args.get("--max-consecutive-failures"), "--max-consecutive-failures", 0);
  if (args.has("--shard")) f.shard = parse_shard(args.get("--shard"));
  return f;
}

// Everything `run` and `validate` check before anything is written.
struct Prepared {
  std::unique_ptr<PluginHost> host;
  std::vector<Trial> trials;
  std::vector<std::vector<store::PluginRecord>> plugins;  // per trial
  std::vector<std::string> identities;                    // per trial
  std::map<std::string, std::string> devices;             // device.type -> resolved
};

std::vector<store::PluginRecord> plugin_records(const PluginHost& host, const Experiment& e) {
  std::vector<store::PluginRecord> records;
  auto add = [&](PluginKind kind, const std::string& name) {
    const LoadedLibrary& lib = host.library_of(kind, name);
    records.push_back({to_string(kind), name, lib.path.string(), lib.plugin_version, lib.sha256});
  };
  add(PluginKind::model, e.model.plugin);
  if (e.data) add(PluginKind::loader, e.data->plugin);
  if (e.optimizer) add(PluginKind::optimizer, e.optimizer->plugin);
  if (e.comm_hook) add(PluginKind::comm_hook, e.comm_hook->plugin);
  return records;
}

// The device check touches CUDA, which must not be initialised in the runner
// process: its run processes are forked from it, and CUDA does not survive a fork.
std::string resolve_device_isolated(const std::string& type) {
  if (type == "cpu") return "cpu";
  const std::string answer = capture_in_child([&] {
    try {
      return "ok:" + resolve_device(type);
    } catch (const Error& e) {
      return "error:" + std::string(e.what()) + "\n" + e.hint();
    }
  });
  if (answer.rfind("ok:", 0) == 0) return answer.substr(3);
  const std::string body = answer.substr(answer.find(':') + 1);
  const auto newline = body.find('\n');
  throw Error(body.substr(0, newline), newline == std::string::npos ? "" : body.substr(newline + 1));
}

Prepared prepare(const fs::path& file, const Global& global, const std::vector<std::string>& set) {
  Prepared p;
  const auto parsed = parse_experiment_file(file, set);
  p.host = std::make_unique<PluginHost>();
  load_plugins(*p.host, plugin_paths_of(*parsed), global);
  p.trials = expand_trials(*parsed, *p.host);
  for (const Trial& t : p.trials) {
    p.plugins.push_back(plugin_records(*p.host, t.experiment));
    p.identities.push_back(trial_identity(t.experiment.config_hash(), p.plugins.back()));
    const std::string& type = t.experiment.device.type;
    if (!p.devices.count(type)) p.devices[type] = resolve_device_isolated(type);
  }
  return p;
}

std::string trial_name(const Trial& t) {
  return t.label.empty() ? "trial " + std::to_string(t.index + 1)
                         : "trial " + std::to_string(t.index + 1) + " (" + t.label + ")";
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string((s % 3600) / 60) + "m";
}

// The body of one run, in the run process (or in-process with --isolate none):
// applies the trial's runtime settings, fingerprints the environment as the run
// sees it, runs, and records everything in its own database connection.
RunOutcome run_and_record(store::Store& db, std::int64_t run_id, const Trial& trial,
                          const PluginHost& host, const Global& global,
                          const std::atomic<bool>* stop, const std::string& progress_prefix,
                          std::chrono::steady_clock::time_point origin) {
  const Experiment& exp = trial.experiment;
  configure_runtime(exp);
  const Fingerprint fingerprint = collect_fingerprint(exp.seed);
  const auto fingerprint_id = db.upsert_fingerprint(fingerprint.hash(), fingerprint.json());
  db.set_run_fingerprint(run_id, fingerprint_id);
  // The peak is measured once per fingerprint and device, by the first run
  // that needs it, before its own steps (so it never overlaps a measurement).
  const std::string device = resolve_device(exp.device.type);
  std::optional<double> peak = db.peak_flop_per_s(fingerprint_id, device, "float32");
  if (!peak) {
    // In a child of the run process: the matmuls start LibTorch's thread pool,
    // and a [distributed] run forks its other ranks from this process later
    // (a pool does not survive a fork; see docs/execution.md).
    const std::string text = capture_in_child(
        [&] { return std::to_string(measure_peak_flop_per_s(device)); });
    peak = std::stod(text);
    db.set_peak_flop_per_s(fingerprint_id, device, "float32", *peak,
                           device == "cpu" ? "best of 5 fp32 matmuls 1024^3"
                                           : "best of 5 fp32 matmuls 4096^3");
  }
  RunRequest request;
  request.peak_flop_per_s = peak;
  request.experiment = &exp;
  request.host = &host;
  request.process_start = origin;
  request.stop = stop;
  const bool terminal = ::isatty(STDERR_FILENO) == 1;
  request.on_progress = [&, terminal](const Progress& p) {
    std::string line = progress_prefix + " step " + std::to_string(p.step) + "/" +
                       std::to_string(p.total_steps);
    if (!std::isnan(p.last_loss)) line += "  loss " + format_number(p.last_loss);
    line += "  " + format_number(p.steps_per_s) + " steps/s";
    if (terminal) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else {
      spdlog::info("{}", line);
    }
  };
  RunOutcome outcome = execute_run(request);
  if (terminal) std::cerr << "\r\033[K" << std::flush;
  db.add_samples(run_id, outcome.samples);
  db.finish_run(run_id, outcome.status, outcome.error, outcome.summaries, outcome.metrics);
  return outcome;
}

// Final status of a run from its process's exit, when the process did not
// record one itself.
void record_child_exit(store::Store& db, std::int64_t run_id, const ChildExit& exit,
                       double timeout_s) {
  const auto run = db.get_run(run_id);
  if (run && run->row.stored_status != store::RunStatus::running) return;  // it recorded its verdict
  switch (exit.kind) {
    case ChildExit::Kind::timed_out:
      db.finish_run(run_id, store::RunStatus::timeout,
                    "exceeded the timeout of " + format_duration(timeout_s) + " and was killed",
                    {}, {});
      break;
    case ChildExit::Kind::interrupted:
      db.mark_interrupted(run_id, "killed by a second interrupt");
      break;
    case ChildExit::Kind::signaled:
      db.finish_run(run_id, store::RunStatus::crashed,
                    describe_signal(exit.signal) +
                        (exit.signal == SIGKILL ? "; out of memory (OOM killer)?" : ""),
                    {}, {}, exit.signal);
      break;
    case ChildExit::Kind::exited:
      db.finish_run(run_id, store::RunStatus::failed,
                    "the run process exited with code " + std::to_string(exit.exit_code) +
                        " before recording a result",
                    {}, {});
      break;
  }
}

// Runs left "running" by a runner process of this host that no longer exists
// (killed with SIGKILL, power loss of a container, ...): interrupted now,
// without waiting for their heartbeat to go stale.
bool process_gone(std::int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  // A killed process nobody has reaped yet still answers kill(); it is a zombie.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

std::int64_t mark_orphans_interrupted(store::Store& db) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::int64_t marked = 0;
  for (const auto& run : db.running_runs()) {
    // A run killed before its process recorded a fingerprint has no host:
    // databases are per machine (shards are merged afterwards), so it is ours.
    if (run.pid <= 0 || (!run.hostname.empty() && run.hostname != host)) continue;
    if (!process_gone(run.pid)) continue;
    if (db.mark_interrupted(run.run_id, "its runner process (pid " + std::to_string(run.pid) +
                                            ") is gone"))
      ++marked;
  }
  return marked;
}

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

int run_experiment(const fs::path& file, const Global& global, const RunFlags& flags) {
  Prepared p = prepare(file, global, flags.set);
  const Experiment& first = p.trials.front().experiment;
  const std::int64_t repeats = first.repeats;
  if (!flags.isolate)
    for (const Trial& trial : p.trials)
      if (trial.experiment.distributed.enabled)
        throw Error(trial_name(trial) + " is a [distributed] run, which needs process isolation",
                    "drop --isolate none: the other ranks are forked from the run process before "
                    "it runs any operator, which only a fresh run process guarantees");

  std::vector<PlannedRun> plan;
  for (const PlannedRun& r : interleave(p.trials.size(), repeats, flags.shuffle,
                                        static_cast<std::uint64_t>(first.seed)))
    if (in_shard(p.identities[r.trial], r.repeat, flags.shard)) plan.push_back(r);

  // Which planned runs already exist (read-only for a dry run).
  auto existing_runs = [&](const store::Store& db) {
    std::vector<std::vector<store::TrialRun>> existing;
    for (const auto& identity : p.identities) existing.push_back(db.runs_of_identity(identity));
    return existing;
  };

  if (flags.dry_run) {
    std::vector<std::vector<store::TrialRun>> existing(p.trials.size());
    std::error_code ec;
    if (fs::exists(global.db, ec)) existing = existing_runs(store::Store::open_read_only(global.db));
    Table table({"#", "trial", "repeat", "action"});
    std::int64_t to_run = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const std::string reason = skip_reason(existing[plan[i].trial], plan[i].repeat, flags.policy);
      to_run += reason.empty() ? 1 : 0;
      table.add({std::to_string(i + 1), trial_name(p.trials[plan[i].trial]),
                 std::to_string(plan[i].repeat), reason.empty() ? "run" : "skip: " + reason});
    }
    table.print(std::cout);
    std::cout << to_run << " of " << plan.size() << " runs would run";
    if (flags.shard.count > 1)
      std::cout << " (shard " << flags.shard.index << "/" << flags.shard.count << ")";
    std::cout << "; nothing was written\n";
    return kExitOk;
  }

  store::Store::check_writable(global.db);
  // Optional because the connection is closed around every fork: SQLite's
  // locking state must never be inherited by a child process.
  std::optional<store::Store> connection(store::Store::open(global.db));
  store::Store& db = *connection;
  if (const auto stale = db.mark_stale_runs_interrupted() + mark_orphans_interrupted(db); stale > 0)
    spdlog::warn("{} run(s) left running by a runner that stopped were marked interrupted", stale);
  const auto experiment_id = db.upsert_experiment(
      first.name, fs::absolute(first.source_path).lexically_normal().string(), first.source_text);
  std::vector<std::int64_t> trial_ids;
  for (std::size_t t = 0; t < p.trials.size(); ++t)
    trial_ids.push_back(db.upsert_trial(experiment_id, p.trials[t].experiment.resolved_json(),
                                        p.trials[t].experiment.config_hash(), p.identities[t],
                                        p.trials[t].label));
  const auto existing = existing_runs(db);
  std::vector<PlannedRun> todo;
  std::int64_t skipped = 0;
  for (const PlannedRun& r : plan) {
    if (skip_reason(existing[r.trial], r.repeat, flags.policy).empty()) {
      todo.push_back(r);
    } else {
      ++skipped;
    }
  }
  spdlog::info("experiment '{}' ({}): {} trial(s) x {} repetition(s); {} to run, {} already done; "
               "database {}",
               first.name, to_string(first.kind), p.trials.size(), repeats, todo.size(), skipped,
               global.db.string());

  Interrupts::install();
  const bool train = first.kind == RunKind::train;
  Table table(train ? std::vector<std::string>{"run", "trial", "repeat", "status", "step p50",
                                               "step p90", "samples/s", "loss final"}
                    : std::vector<std::string>{"run", "trial", "repeat", "status", "latency p50",
                                               "p90", "p99", "samples/s"});
  std::int64_t failures = 0, consecutive = 0, done = 0;
  double spent_s = 0;
  bool stopped_by_policy = false;
  for (const PlannedRun& r : todo) {
    if (Interrupts::count() > 0) break;
    const Trial& trial = p.trials[r.trial];
    const Experiment& exp = trial.experiment;
    store::RunStart start;
    start.trial_id = trial_ids[r.trial];
    start.repeat_index = r.repeat;
    start.kind = exp.kind;
    start.seed = static_cast<std::int64_t>(run_seed(exp, r.repeat));
    start.load_average = load_average_1m();
    const auto run_id = connection->begin_run(start);
    connection->add_plugins(run_id, p.plugins[r.trial]);
    const double eta = done > 0 ? spent_s / static_cast<double>(done) *
                                      static_cast<double>(todo.size() - static_cast<std::size_t>(done))
                                : std::nan("");
    const std::string prefix = "[" + std::to_string(done + 1) + "/" + std::to_string(todo.size()) +
                               "] run " + std::to_string(run_id) + " " + trial_name(trial) +
                               " repeat " + std::to_string(r.repeat) +
                               (std::isnan(eta) ? "" : " eta " + format_duration(eta)) +
                               (failures ? " failures " + std::to_string(failures) : "");
    const auto t0 = std::chrono::steady_clock::now();
    // time_to_first_step_s: the first run of an invocation counts from
    // `runner run` itself (start-up, plugin loading, validation included);
    // later runs from their own start.
    const auto origin = done == 0 ? global.start : t0;
    if (flags.isolate) {
      ChildOptions options;
      options.timeout = std::chrono::duration<double>(exp.timeout_s);
      options.tick = std::chrono::duration<double>(10.0);
      options.on_tick = [&] { store::Store::open(global.db).heartbeat(run_id); };
      connection.reset();
      const ChildExit exit = run_in_child(
          [&]() -> int {
            store::Store child_db = store::Store::open(global.db);
            const RunOutcome outcome = run_and_record(child_db, run_id, trial, *p.host, global,
                                                      &child_stop_flag(), prefix, origin);
            return outcome.status == store::RunStatus::finished ? 0 : 3;
          },
          options);
      connection.emplace(store::Store::open(global.db));
      record_child_exit(*connection, run_id, exit, exp.timeout_s);
    } else {
      (void)run_and_record(*connection, run_id, trial, *p.host, global, &Interrupts::flag(), prefix, origin);
    }
    spent_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++done;

    const auto detail = connection->get_run(run_id);
    const std::string status = detail ? to_string(detail->row.status) : "?";
    if (detail && detail->row.status == store::RunStatus::finished) {
      consecutive = 0;
    } else if (!detail || detail->row.status != store::RunStatus::interrupted) {
      ++failures;
      ++consecutive;
      spdlog::error("run {} ({}, repeat {}) {}: {}", run_id, trial_name(trial), r.repeat, status,
                    detail ? detail->error : "");
    }
    const store::Summary* wall =
        detail ? find_summary(detail->summaries, train ? "step_time" : "latency") : nullptr;
    if (wall != nullptr)
      if (const std::string noisy = store::noise_warning(*wall); !noisy.empty())
        spdlog::warn("run {}: {}", run_id, noisy);
    const std::vector<store::Metric> metrics = detail ? detail->metrics : std::vector<store::Metric>{};
    const std::string trial_column = trial.label.empty() ? std::to_string(trial.index + 1) : trial.label;
    if (train) {
      table.add({std::to_string(run_id), trial_column, std::to_string(r.repeat), status,
                 wall ? format_ns(wall->p50) : "-", wall ? format_ns(wall->p90) : "-",
                 format_number(find_metric(metrics, "samples_per_s")),
                 format_number(find_metric(metrics, "loss_final"))});
    } else {
      table.add({std::to_string(run_id), trial_column, std::to_string(r.repeat), status,
                 wall ? format_ns(wall->p50) : "-", wall ? format_ns(wall->p90) : "-",
                 wall ? format_ns(wall->p99) : "-",
                 format_number(find_metric(metrics, "samples_per_s"))});
    }
    if (flags.max_failures > 0 && failures >= flags.max_failures) {
      spdlog::error("stopping: {} failed run(s) reached --max-failures {}", failures,
                    flags.max_failures);
      stopped_by_policy = true;
      break;
    }
    if (flags.max_consecutive_failures > 0 && consecutive >= flags.max_consecutive_failures) {
      spdlog::error("stopping: {} consecutive failed runs (--max-consecutive-failures {}); "
                    "the machine or the setup is probably broken",
                    consecutive, flags.max_consecutive_failures);
      stopped_by_policy = true;
      break;
    }
  }
  const bool interrupted = Interrupts::count() > 0;
  std::cout << "\n" << first.name << " (" << first.kind << ", " << p.trials.size()
            << " trial(s), " << done << " run(s) now, " << skipped << " skipped as done)\n";
  if (!table.empty()) table.print(std::cout);
  std::cout << "recorded in " << global.db.string() << "\n";
  if (interrupted) {
    spdlog::warn("interrupted: {} of {} runs done; run the same command again to resume", done,
                 todo.size());
    return 128 + SIGINT;
  }
  if (stopped_by_policy) return kExitRunFailed;
  return failures == 0 ? kExitOk : kExitRunFailed;
}

int handle_run(const Args& args, const Global& global) {
  return run_experiment(args.positionals[0], global, run_flags(args));
}

// --- rerun ------------------------------------------------------------------

std::string toml_value(const JsonValue& v) {
  switch (v.type) {
    case JsonValue::Type::boolean: return v.boolean ? "true" : "false";
    case JsonValue::Type::integer:
    case JsonValue::Type::number: return v.text;  // canonical JSON numbers are valid TOML
    case JsonValue::Type::string: return json_quote(v.text);  // JSON escapes are TOML escapes
    case JsonValue::Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.items.size(); ++i)
        out += (i ? ", " : "") + toml_value(v.items[i]);
      return out + "]";
    }
    default:
      throw Error("cannot rerun: unexpected value in the stored configuration", {},
                  ErrorKind::run);
  }
}

// A stored resolved configuration written back as an experiment file: the
// sections of the canonical JSON, with plugin options inlined into their section.
std::string config_to_toml(const JsonValue& config, const std::string& name,
                           const std::vector<store::PluginRecord>& plugins) {
  std::string out = "# generated by 'runner rerun' from a stored configuration\n[experiment]\n";
  out += "name = " + json_quote(name) + "\n";
  for (const char* key : {"kind", "seed"})
    if (const JsonValue* v = config.find(key)) out += std::string(key) + " = " + toml_value(*v) + "\n";
  for (const auto& [section, value] : config.members) {
    if (value.type != JsonValue::Type::object) continue;
    out += "\n[" + section + "]\n";
    for (const auto& [key, item] : value.members) {
      if (key == "options") {
        for (const auto& [option, option_value] : item.members)
          out += option + " = " + toml_value(option_value) + "\n";
      } else {
        out += key + " = " + toml_value(item) + "\n";
      }
    }
  }
  out += "\n[plugins]\npath = [";
  for (std::size_t i = 0; i < plugins.size(); ++i)
    out += (i ? ", " : "") + json_quote(plugins[i].library);
  return out + "]\n";
}

int handle_rerun(const Args& args, const Global& global) {
  const std::int64_t id = parse_integer(args.positionals[0], "RUN_ID", 1);
  std::optional<store::RunDetail> run;
  {
    const store::Store db = store::Store::open_read_only(global.db);
    run = db.get_run(id);
  }
  if (!run)
    throw Error("run " + std::to_string(id) + " is not in " + global.db.string(),
                "run 'runner runs' to list the recorded runs");
  for (const auto& plugin : run->plugins) {
    std::error_code ec;
    if (!fs::exists(plugin.library, ec))
      throw Error("cannot rerun run " + std::to_string(id) + ": its " + plugin.kind +
                      " plugin library '" + plugin.library + "' no longer exists",
                  "rebuild or reinstall the plugin at that path");
    const std::string now = sha256_file_hex(plugin.library);
    if (now != plugin.sha256)
      spdlog::warn("{} plugin '{}' changed since run {}: {} was {}, is now {}; the rerun uses "
                   "the current file",
                   plugin.kind, plugin.name, id, plugin.library, plugin.sha256.substr(0, 12),
                   now.substr(0, 12));
  }
  const std::string text =
      config_to_toml(parse_json(run->config_json), run->row.experiment, run->plugins);
  // The generated file lives next to the database's temporary files and is
  // removed afterwards; its text is stored with the experiment like any other.
  const fs::path dir = fs::temp_directory_path() /
                       ("runner-rerun-" + std::to_string(::getpid()) + "-" + std::to_string(id));
  fs::create_directories(dir);
  const fs::path file = dir / (run->row.experiment + ".rerun.toml");
  {
    std::ofstream out(file);
    out << text;
  }
  RunFlags flags = run_flags(args);
  flags.policy = ResumePolicy::force;
  flags.set.push_back("experiment.repeats=1");
  int code = kExitRunFailed;
  try {
    {
      // The same configuration must come back, or the rerun would not be one.
      const auto parsed = parse_experiment_file(file, {});
      PluginHost host;
      load_plugins(host, plugin_paths_of(*parsed), global);
      const auto trials = expand_trials(*parsed, host);
      if (trials.size() != 1 || trials.front().experiment.config_hash() != run->config_hash)
        spdlog::warn("the configuration of run {} no longer resolves to the same hash ({} now, "
                     "{} then): a plugin's declared options changed",
                     id, trials.front().experiment.config_hash().substr(0, 12),
                     run->config_hash.substr(0, 12));
    }
    code = run_experiment(file, global, flags);
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  return code;
}

int handle_validate(const Args& args, const Global& global) {
  std::vector<std::string> set;
  if (auto it = args.values.find("--set"); it != args.values.end()) set = it->second;
  const Prepared p = prepare(args.positionals[0], global, set);
  const Experiment& e = p.trials.front().experiment;
  std::cout << e.source_path.string() << ": ok\n"
            << "experiment '" << e.name << "' (" << e.kind << "): " << p.trials.size()
            << " trial(s) x " << e.repeats << " repetition(s)\n";
  if (args.has("--list-trials")) {
    Table table({"#", "label", "model", "loader", "optimizer", "device", "config"});
    for (const Trial& t : p.trials) {
      const Experiment& x = t.experiment;
      table.add({std::to_string(t.index + 1), t.label.empty() ? "-" : t.label, x.model.plugin,
                 x.data ? x.data->plugin : "-", x.optimizer ? x.optimizer->plugin : "-",
                 p.devices.at(x.device.type), x.config_hash().substr(0, 12)});
    }
    table.print(std::cout);
  }
  return kExitOk;
}

}  // namespace

Command run_command() {
  CommandDef def;
  def.name = "run";
  def.summary = "run an experiment's trials and record every run in the database";
  def.usage = "runner run FILE [options]";
  def.positionals = {"FILE"};
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
  };
  def.details =
      "Everything is checked before anything is written: a bad file, an unknown plugin,\n"
      "a bad option or an unwritable database exits 2 and leaves the database untouched.\n"
      "Runs already recorded for the same trial (same resolved configuration and plugin\n"
      "files) are skipped, so the same command resumes an interrupted sweep.\n"
      "Ctrl-C stops the current run cleanly (interrupted); a second Ctrl-C kills it.\n"
      "Exit codes: 0 all runs finished, 1 a run failed, 2 bad input or usage, 130 interrupted.";
  return {def, &handle_run};
}

Command rerun_command() {
  CommandDef def;
  def.name = "rerun";
  def.summary = "run a recorded run's exact configuration again, as a new run";
  def.usage = "runner rerun RUN_ID [options]";
  def.positionals = {"RUN_ID"};
  def.options = {
      {"--isolate", "MODE", "process (default) or none", false},
  };
  def.details =
      "Rebuilds the run's stored resolved configuration (canonical JSON) and runs it once,\n"
      "loading the same plugin library files. A plugin whose file hash changed since is\n"
      "named in a warning; the rerun then belongs to a new trial (identity includes hashes).";
  return {def, &handle_rerun};
}

Command validate_command() {
  CommandDef def;
  def.name = "validate";
  def.summary = "check an experiment file and its trials without running anything";
  def.usage = "runner validate FILE [options]";
  def.positionals = {"FILE"};
  def.options = {
      {"--set", "KEY=VALUE", "override a dotted key of the file", true},
      {"--list-trials", "", "print the expanded list of trials", false},
  };
  def.details =
      "Checks syntax, sections, keys, types, ranges, extends, sweeps, plugin names and\n"
      "plugin options of every trial.";
  return {def, &handle_validate};
}

}  // namespace runner::cli
