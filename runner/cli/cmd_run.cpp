// runner run FILE: validate everything, then run every repetition and record it.
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>

#include "runner/cli/commands.hpp"
#include "runner/cli/table.hpp"
#include "runner/core/common/error.hpp"
#include "runner/core/engine/engine.hpp"
#include "runner/core/experiment/experiment.hpp"
#include "runner/core/fingerprint/fingerprint.hpp"
#include "runner/core/plugin/host.hpp"
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

// Everything `run` and `validate` check before anything is written.
struct Prepared {
  std::unique_ptr<PluginHost> host;
  Experiment experiment;
  std::string device;
};

Prepared prepare(const fs::path& file, const Global& global) {
  Prepared p;
  const auto parsed = parse_experiment_file(file);
  p.host = std::make_unique<PluginHost>();
  load_plugins(*p.host, plugin_paths_of(*parsed), global);
  p.experiment = resolve_experiment(*parsed, *p.host);
  p.device = resolve_device(p.experiment.device.type);
  return p;
}

std::vector<store::PluginRecord> plugin_records(const Prepared& p) {
  std::vector<store::PluginRecord> records;
  auto add = [&](PluginKind kind, const std::string& name) {
    const LoadedLibrary& lib = p.host->library_of(kind, name);
    records.push_back({to_string(kind), name, lib.path.string(), lib.plugin_version, lib.sha256});
  };
  const Experiment& e = p.experiment;
  add(PluginKind::model, e.model.plugin);
  if (e.data) add(PluginKind::loader, e.data->plugin);
  if (e.optimizer) add(PluginKind::optimizer, e.optimizer->plugin);
  return records;
}

double metric_of(const RunOutcome& o, const std::string& name) {
  for (const auto& m : o.metrics)
    if (m.name == name) return m.value;
  return std::nan("");
}

const store::Summary* summary_of(const RunOutcome& o, const std::string& name) {
  for (const auto& s : o.summaries)
    if (s.metric == name) return &s;
  return nullptr;
}

int handle(const Args& args, const Global& global) {
  Prepared p = prepare(args.positionals[0], global);
  const Experiment& exp = p.experiment;
  store::Store::check_writable(global.db);
  configure_runtime(exp);
  const Fingerprint fingerprint = collect_fingerprint(exp.seed);

  store::Store db = store::Store::open(global.db);
  const auto experiment_id = db.upsert_experiment(
      exp.name, fs::absolute(exp.source_path).lexically_normal().string(), exp.source_text);
  const auto trial_id = db.upsert_trial(experiment_id, exp.resolved_json(), exp.config_hash());
  const auto fingerprint_id = db.upsert_fingerprint(fingerprint.hash(), fingerprint.json());
  const auto plugins = plugin_records(p);

  spdlog::info("experiment '{}' ({}) on {}: {} repetition(s), database {}", exp.name, exp.kind,
               p.device, exp.repeats, global.db.string());
  const bool train = exp.kind == "train";
  Table table(train ? std::vector<std::string>{"run", "repeat", "status", "steps", "step p50",
                                               "step p90", "samples/s", "loss first", "loss final"}
                    : std::vector<std::string>{"run", "repeat", "status", "batches",
                                               "latency p50", "p90", "p99", "samples/s"});
  int failures = 0;
  for (std::int64_t repeat = 0; repeat < exp.repeats; ++repeat) {
    store::RunStart start;
    start.trial_id = trial_id;
    start.fingerprint_id = fingerprint_id;
    start.repeat_index = repeat;
    start.kind = exp.kind;
    start.seed = static_cast<std::int64_t>(run_seed(exp, repeat));
    start.load_average = load_average_1m();
    const auto run_id = db.begin_run(start);
    db.add_plugins(run_id, plugins);

    RunRequest request;
    request.experiment = &exp;
    request.host = p.host.get();
    request.repeat_index = repeat;
    request.process_start = global.start;
    request.on_progress = [&](const Progress& progress) {
      if (std::isnan(progress.last_loss))
        spdlog::info("run {} step {}/{}  {:.0f} steps/s", run_id, progress.step,
                     progress.total_steps, progress.steps_per_s);
      else
        spdlog::info("run {} step {}/{}  loss {:.4f}  {:.0f} steps/s", run_id, progress.step,
                     progress.total_steps, progress.last_loss, progress.steps_per_s);
    };
    const RunOutcome outcome = execute_run(request);
    db.add_samples(run_id, outcome.samples);
    db.finish_run(run_id, outcome.status, outcome.error, outcome.summaries, outcome.metrics);
    if (outcome.status != store::kStatusFinished) {
      ++failures;
      spdlog::error("run {} {}: {}", run_id, outcome.status, outcome.error);
    }
    const store::Summary* wall = summary_of(outcome, train ? "step_time" : "latency");
    const std::string n = wall ? std::to_string(wall->n) : "0";
    if (train) {
      table.add({std::to_string(run_id), std::to_string(repeat), outcome.status, n,
                 wall ? format_ns(wall->p50) : "-", wall ? format_ns(wall->p90) : "-",
                 format_number(metric_of(outcome, "samples_per_s")),
                 format_number(metric_of(outcome, "loss_initial")),
                 format_number(metric_of(outcome, "loss_final"))});
    } else {
      table.add({std::to_string(run_id), std::to_string(repeat), outcome.status, n,
                 wall ? format_ns(wall->p50) : "-", wall ? format_ns(wall->p90) : "-",
                 wall ? format_ns(wall->p99) : "-",
                 format_number(metric_of(outcome, "samples_per_s"))});
    }
  }
  std::cout << "\n" << exp.name << " (" << exp.kind << ", " << p.device << ", config "
            << exp.config_hash().substr(0, 12) << ")\n";
  table.print(std::cout);
  std::cout << "recorded in " << global.db.string() << "\n";
  return failures == 0 ? kExitOk : kExitRunFailed;
}

int handle_validate(const Args& args, const Global& global) {
  const Prepared p = prepare(args.positionals[0], global);
  const Experiment& e = p.experiment;
  std::cout << e.source_path.string() << ": ok\n"
            << "experiment '" << e.name << "' (" << e.kind << ") on " << p.device << ", "
            << e.repeats << " repetition(s), config " << e.config_hash().substr(0, 12) << "\n"
            << "  model " << e.model.plugin;
  if (e.data) std::cout << ", loader " << e.data->plugin;
  if (e.optimizer) std::cout << ", optimizer " << e.optimizer->plugin;
  std::cout << "\n";
  return kExitOk;
}

}  // namespace

Command run_command() {
  CommandDef def;
  def.name = "run";
  def.summary = "run an experiment and record every run in the database";
  def.usage = "runner run FILE [options]";
  def.positionals = {"FILE"};
  def.details =
      "Everything is checked before anything is written: a bad file, an unknown plugin,\n"
      "a bad option or an unwritable database exits 2 and leaves the database untouched.\n"
      "Exit codes: 0 all runs finished, 1 a run failed, 2 bad input or usage.";
  return {def, &handle};
}

Command validate_command() {
  CommandDef def;
  def.name = "validate";
  def.summary = "check an experiment file without running it";
  def.usage = "runner validate FILE [options]";
  def.positionals = {"FILE"};
  def.details = "Checks syntax, sections, keys, types, ranges, plugin names and plugin options.";
  return {def, &handle_validate};
}

}  // namespace runner::cli
