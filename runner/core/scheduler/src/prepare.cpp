#include "runner/scheduler/prepare.hpp"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "runner/common/error.hpp"
#include "runner/common/output_path.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/engine.hpp"
#include "runner/fingerprint/fingerprint.hpp"
#include "runner/runtime/runtime.hpp"
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

struct ResolvedDevice {
  std::string name;                               ///< "cpu" or "cuda"
  std::map<std::string, std::string> gpu_fields;  ///< for "cuda": the GPU part of identities
};

// The device check touches CUDA, which must not be initialised in the runner
// process: its run processes are forked from it, and CUDA does not survive a
// fork. The same child reads the GPU facts that join a CUDA trial's identity.
ResolvedDevice resolve_device_isolated(const std::string& type) {
  if (type == "cpu") return {"cpu", {}};
  const std::string answer = capture_in_child([&] {
    try {
      const std::string device = resolve_device(type);
      nlohmann::json gpu = nlohmann::json::object();
      if (device == "cuda") gpu = gpu_identity_fields();
      return "ok:" + device + "\n" + gpu.dump();
    } catch (const Error& e) {
      return "error:" + std::string(e.what()) + "\n" + e.hint();
    }
  });
  if (answer.rfind("ok:", 0) != 0) rethrow_child_error(answer);
  const auto newline = answer.find('\n');
  ResolvedDevice resolved{answer.substr(3, newline - 3), {}};
  const auto gpu = nlohmann::json::parse(answer.substr(newline + 1), nullptr, false);
  if (gpu.is_object())
    for (const auto& [key, value] : gpu.items())
      if (value.is_string()) resolved.gpu_fields[key] = value.get<std::string>();
  return resolved;
}

// What only the plugins can tell about a trial (its init_from weights load
// into its model, its optimizer takes its options on its device and can
// follow its recipe, channels_last has images, the loader's files are
// sound and the augmentations fit its samples) is checked before anything
// runs: a problem is the input's fault (exit 2), not a failed run. One child
// process checks every distinct combination (LibTorch's thread pools must
// not start in a process that forks runs), and stops at the first problem.
void check_before_runs_isolated(const std::vector<Trial>& trials, const PluginHost& host,
                                const std::map<std::string, std::string>& devices) {
  const std::string answer = capture_in_child([&] {
    try {
      std::set<std::string> checked;
      for (const Trial& t : trials) {
        const Experiment& e = t.experiment;
        // What decides the outcome: the plugins, the weights, the recipe and the device.
        Experiment shape;
        shape.kind = e.kind;
        shape.device.type = devices.at(e.device.type);
        shape.model = e.model;
        shape.model_settings = e.model_settings;
        shape.data = e.data;
        // The data settings the checks read (not workers or prefetch: a sweep
        // over those builds the loader once).
        shape.data_settings.augment = e.data_settings.augment;
        shape.data_settings.batch_size = e.data_settings.batch_size;  // models' data checks
        shape.data_settings.pin_memory = e.data_settings.pin_memory;
        shape.data_settings.on_error = e.data_settings.on_error;
        shape.optimizer = e.optimizer;
        shape.train.precision = e.train.precision;
        shape.infer.precision = e.infer.precision;
        shape.schedule.enabled = e.schedule.enabled;
        shape.schedule.type = e.schedule.type;
        shape.schedule.cycle_momentum = e.schedule.cycle_momentum;
        if (!checked.insert(shape.resolved_json()).second) continue;
        try {
          check_before_runs(e, host, shape.device.type);
        } catch (const Error& error) {
          if (trials.size() == 1) throw;
          throw Error(std::string(error.what()) + " (in " + trial_name(t) + ")", error.hint());
        }
      }
      return std::string("ok");
    } catch (const Error& error) {
      return "error:" + std::string(error.what()) + "\n" + error.hint();
    } catch (const std::exception& error) {
      return "error:" + std::string(error.what()) + "\n";
    }
  });
  if (answer != "ok") rethrow_child_error(answer);
}

// train.save_to under the output-path rule (runner/common/output_path.hpp),
// before any run: a device, FIFO, socket, directory or symbolic link where a
// run would save its weights is refused at the key and left as it is.
void check_save_paths(const Experiment& e) {
  if (e.train.save_to.empty()) return;
  OutputUse use;
  use.option = "train.save_to";
  use.example = "weights.safetensors";
  use.what = "weights";
  use.standard_output = false;
  use.probe_folder = false;  // the run creates its folder
  use.where = e.where_of("train.save_to");
  for (std::int64_t r = 0; r < e.repeats; ++r) (void)check_output(e.save_path(r), use);
}

}  // namespace

void load_plugins(PluginHost& host, const std::vector<fs::path>& experiment_paths,
                  const PluginSearch& search, std::vector<std::string>& warnings) {
  if (search.allow_unsafe) host.allow_unsafe_paths(true);
  for (const auto& p : default_plugin_paths()) {
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      warnings.push_back("plugin path '" + terminal_safe(p.string()) +
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
  if (e.kind != RunKind::kernel) add(PluginKind::model, e.model.plugin);
  if (e.kernel) add(PluginKind::kernel, e.kernel->plugin);
  if (e.data) add(PluginKind::loader, e.data->plugin);
  if (e.optimizer) add(PluginKind::optimizer, e.optimizer->plugin);
  if (e.comm_hook) add(PluginKind::comm_hook, e.comm_hook->plugin);
  return records;
}

PreparedExperiment prepare_experiment(const fs::path& file,
                                      const std::vector<std::string>& set_overrides,
                                      const PluginSearch& search) {
  PreparedExperiment p;
  p.file = file;
  p.set_overrides = set_overrides;
  p.search = search;
  const auto parsed = parse_experiment_file(file, set_overrides);
  p.host = std::make_unique<PluginHost>();
  load_plugins(*p.host, plugin_paths_of(*parsed), search, p.warnings);
  p.trials = expand_trials(*parsed, *p.host);
  for (const Trial& t : p.trials) check_save_paths(t.experiment);
  std::map<std::string, std::map<std::string, std::string>> gpu_fields;  // by device.type
  for (const Trial& t : p.trials) {
    const std::string& type = t.experiment.device.type;
    if (!p.devices.count(type)) {
      ResolvedDevice resolved = resolve_device_isolated(type);
      p.devices[type] = resolved.name;
      gpu_fields[type] = std::move(resolved.gpu_fields);
    }
    p.plugins.push_back(plugin_records(*p.host, t.experiment));
    p.environments.push_back(trial_environment(t.experiment, gpu_fields[type]));
    p.identities.push_back(trial_identity(t.experiment.config_hash(), p.plugins.back(),
                                          sha256_hex(p.environments.back())));
  }
  check_before_runs_isolated(p.trials, *p.host, p.devices);
  return p;
}

std::string trial_environment(const Experiment& e,
                              const std::map<std::string, std::string>& gpu_fields) {
  std::vector<int> cpus = bound_cpus(e.runtime_request());
  if (cpus.empty()) cpus = allowed_cpus();
  Fingerprint fp = identity_fingerprint(e.env, format_cpu_list(cpus));
  for (const auto& [key, value] : gpu_fields) fp.fields[key] = value;
  return fp.json();
}

std::string trial_name(const Trial& t) {
  return t.label.empty() ? "trial " + std::to_string(t.index + 1)
                         : "trial " + std::to_string(t.index + 1) + " (" + t.label + ")";
}

}  // namespace runner
