// Everything `run` and `validate` check before anything is written: the
// experiment file parsed and expanded, its plugins loaded from the search
// path, every trial's identity computed and every device resolved. No LibTorch here.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// Where plugins come from, in load order after the built-in folder and
/// RUNNER_PLUGIN_PATH: the experiment's [plugins] path, then the caller's
/// (the CLI's --plugin-path).
struct PluginSearch {
  std::vector<std::filesystem::path> extra;  ///< --plugin-path entries, loaded last
  bool allow_unsafe = false;  ///< load libraries other users could have written (PluginHost)
};

/// Loads the built-in folder, RUNNER_PLUGIN_PATH entries (one that does not
/// exist is skipped with a warning appended to `warnings`), `experiment_paths`
/// and `search.extra`, in that order. Throws runner::Error (input) for a bad
/// library or a missing experiment or extra path.
void load_plugins(PluginHost& host, const std::vector<std::filesystem::path>& experiment_paths,
                  const PluginSearch& search, std::vector<std::string>& warnings);

/// An experiment checked from end to end, ready to plan and run.
struct PreparedExperiment {
  std::filesystem::path file;                              ///< the experiment file as given
  std::vector<std::string> set_overrides;                  ///< --set arguments, as given
  PluginSearch search;                                     ///< where plugins came from
  std::unique_ptr<PluginHost> host;
  std::vector<Trial> trials;                               ///< expansion order
  std::vector<std::vector<store::PluginRecord>> plugins;   ///< per trial
  std::vector<std::string> identities;                     ///< per trial
  /// Per trial: the environment fingerprint in its identity (canonical JSON).
  std::vector<std::string> environments;
  std::map<std::string, std::string> devices;              ///< device.type -> resolved ("cpu", "cuda")
  std::vector<std::string> warnings;                       ///< for the user, nothing failed

  /// The first trial's experiment (name, kind, repeats and seed are the same for all).
  [[nodiscard]] const Experiment& first() const { return trials.front().experiment; }
};

/// Parses `file` with `set_overrides` ("key=value"), loads plugins, expands
/// and validates every trial and resolves its device (in a child process:
/// CUDA must not be initialised in a process that forks runs later). Throws
/// runner::Error (input) for anything wrong, before anything is written.
[[nodiscard]] PreparedExperiment prepare_experiment(const std::filesystem::path& file,
                                                    const std::vector<std::string>& set_overrides,
                                                    const PluginSearch& search);

/// The plugin libraries a trial uses, as recorded with its runs.
[[nodiscard]] std::vector<store::PluginRecord> plugin_records(const PluginHost& host,
                                                              const Experiment& experiment);

/// The environment fingerprint of a trial's identity (identity_fingerprint):
/// the CPUs it binds to (else those runner may use) and its [env];
/// `gpu_fields` for a CUDA trial.
[[nodiscard]] std::string trial_environment(const Experiment& experiment,
                                            const std::map<std::string, std::string>& gpu_fields);

/// "trial 3" or "trial 3 (optimizer.lr=0.1)".
[[nodiscard]] std::string trial_name(const Trial& trial);

}  // namespace runner
