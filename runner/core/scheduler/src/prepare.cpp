#include "runner/scheduler/prepare.hpp"

#include <set>

#include "runner/common/error.hpp"
#include "runner/engine/engine.hpp"
#include "runner/process/isolation.hpp"
#include "runner/scheduler/plan.hpp"

namespace fs = std::filesystem;

namespace runner {
namespace {

// An error the child reported as "error:MESSAGE\nHINT", as an input error here.
[[noreturn]] void rethrow_child_error(const std::string& answer) {
  const std::string body = answer.substr(answer.find(':') + 1);
  const auto newline = body.find('\n');
  throw Error(body.substr(0, newline), newline == std::string::npos ? "" : body.substr(newline + 1));
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
  rethrow_child_error(answer);
}

// The init_from weights of every trial that names some must load into its
// model before anything runs: a mismatch is the input's fault (exit 2), not a
// failed run. Checked once per model, data and weights combination, in a
// child (LibTorch's thread pools must not start in a process that forks runs).
void check_weights_isolated(const std::vector<Trial>& trials, const PluginHost& host) {
  std::set<std::string> checked;
  for (const Trial& t : trials) {
    const Experiment& e = t.experiment;
    if (e.model_settings.init_from.empty()) continue;
    // What decides the model's names and shapes: model, data and weights.
    Experiment shape;
    shape.model = e.model;
    shape.model_settings = e.model_settings;
    shape.data = e.data;
    if (!checked.insert(shape.resolved_json()).second) continue;
    const std::string answer = capture_in_child([&] {
      try {
        check_initial_weights(e, host);
        return std::string("ok");
      } catch (const Error& error) {
        return "error:" + std::string(error.what()) + "\n" + error.hint();
      } catch (const std::exception& error) {
        return "error:" + std::string(error.what()) + "\n";
      }
    });
    if (answer != "ok") rethrow_child_error(answer);
  }
}

}  // namespace

void load_plugins(PluginHost& host, const std::vector<fs::path>& experiment_paths,
                  const PluginSearch& search, std::vector<std::string>& warnings) {
  if (search.allow_unsafe) host.allow_unsafe_paths(true);
  for (const auto& p : default_plugin_paths()) {
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      warnings.push_back("plugin path '" + p.string() +
                         "' (RUNNER_PLUGIN_PATH) does not exist; skipped");
      continue;
    }
    host.load(p);
  }
  for (const auto& p : experiment_paths) host.load(p);
  for (const auto& p : search.extra) host.load(p);
}

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

PreparedExperiment prepare_experiment(const fs::path& file,
                                      const std::vector<std::string>& set_overrides,
                                      const PluginSearch& search) {
  PreparedExperiment p;
  const auto parsed = parse_experiment_file(file, set_overrides);
  p.host = std::make_unique<PluginHost>();
  load_plugins(*p.host, plugin_paths_of(*parsed), search, p.warnings);
  p.trials = expand_trials(*parsed, *p.host);
  for (const Trial& t : p.trials) {
    p.plugins.push_back(plugin_records(*p.host, t.experiment));
    p.identities.push_back(trial_identity(t.experiment.config_hash(), p.plugins.back()));
    const std::string& type = t.experiment.device.type;
    if (!p.devices.count(type)) p.devices[type] = resolve_device_isolated(type);
  }
  check_weights_isolated(p.trials, *p.host);
  return p;
}

std::string trial_name(const Trial& t) {
  return t.label.empty() ? "trial " + std::to_string(t.index + 1)
                         : "trial " + std::to_string(t.index + 1) + " (" + t.label + ")";
}

}  // namespace runner
