// An experiment file between its two phases (ParsedExperiment): read and
// checked without plugins, for every trial, then resolved against the plugin
// catalog trial by trial. Its members are defined by concept:
//   experiment.cpp      reading the files, counting and checking every trial
//   sweep.cpp           trial expansion: [sweep] x [[trial]] into Trials
//   host_keys.cpp       the host-level keys of one trial and their combinations
//   machine_checks.cpp  what a trial asks of this machine ([runtime], backend)
//   paths.cpp           paths relative to the file that writes them, and the
//                       files named by content (weights, save_to)
//   plugin_options.cpp  a plugin's table against its declared options and rules
//   expect.cpp          [[expect]] tables against the kind and the sweep
// (internal; not installed).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "document.hpp"
#include "format.hpp"
#include "runner/experiment/experiment.hpp"

namespace runner {

/// Phase-1 result: the merged files with --set applied, every trial's
/// host-level settings checked, plugin tables kept raw. Not copyable: the
/// document points into the TOML trees it owns.
class ParsedExperiment {
 public:
  ParsedExperiment(const std::filesystem::path& path,
                   const std::vector<std::string>& set_overrides);
  ParsedExperiment(const ParsedExperiment&) = delete;
  ParsedExperiment& operator=(const ParsedExperiment&) = delete;

  [[nodiscard]] const std::vector<std::filesystem::path>& plugin_paths() const {
    return plugin_paths_;
  }
  [[nodiscard]] std::int64_t trial_count() const { return trials_ * points_; }
  [[nodiscard]] const std::shared_ptr<const std::vector<Expectation>>& expectations() const {
    return defaults_.expectations;
  }
  [[nodiscard]] Experiment resolve_base(const PluginCatalog& catalog) const {
    return resolve(sources_.doc.sections, catalog);
  }
  [[nodiscard]] std::vector<Trial> expand(const PluginCatalog& catalog) const;

 private:
  using Leaf = experiment::detail::Leaf;
  using Section = experiment::detail::Section;
  using SectionSpec = experiment::detail::SectionSpec;

  // A plugin section whose options wait for the catalog.
  struct PendingPlugin {
    const SectionSpec* spec = nullptr;
    const Section* section = nullptr;
    std::string name;
    const toml::node* name_node = nullptr;
  };
  struct HostConfig {
    Experiment experiment;
    std::optional<PendingPlugin> model, data, optimizer, comm_hook, kernel;
    const Section* distributed = nullptr;  // the [distributed] section, when present
  };

  // sweep.cpp
  [[nodiscard]] std::vector<Leaf> overrides_of(std::int64_t index) const;
  [[nodiscard]] std::vector<Section> sections_of(const std::vector<Leaf>& overrides) const;
  /// Re-throws a trial's error naming the trial, unless `base_check` (the
  /// base configuration) fails the same way: then the files are at fault.
  [[noreturn]] void rethrow_for_trial(const Error& error, std::int64_t index,
                                      const std::vector<Leaf>& overrides,
                                      const std::function<void()>& base_check) const;

  // host_keys.cpp
  [[nodiscard]] HostConfig check_host(const std::vector<Section>& sections) const;
  void read_section(const Section& section, HostConfig& config) const;
  void read_environment(const Section& section, Experiment& e) const;
  void read_labels(const toml::node& node, const std::string& dotted, Experiment& e) const;
  void check_required_sections(const HostConfig& config) const;
  void check_key_combinations(const Experiment& e) const;

  // machine_checks.cpp
  void check_runtime(Experiment& e) const;
  void check_backend(const HostConfig& config) const;

  // paths.cpp
  /// `text` as a path written at `node`, made absolute: a relative path is
  /// relative to the folder of the file that writes it (so an experiment and
  /// its files move together), a --set path to the working directory.
  [[nodiscard]] std::filesystem::path absolute_path(const std::string& text,
                                                    const toml::node& node) const;
  /// A host key's path: a non-empty string, made absolute.
  [[nodiscard]] std::string read_path(const toml::node& node, const std::string& dotted) const;
  /// [plugins] path: a path or a list of them, each made absolute.
  void read_path_list(const toml::node& node, const std::string& dotted, Experiment& e) const;
  /// A path option's value (string or list of strings), each non-empty
  /// string made absolute.
  [[nodiscard]] OptionValue resolve_paths(const OptionValue& value, const toml::node& node) const;
  void check_weights(const std::vector<Section>& sections, HostConfig& config) const;
  /// The SHA-256 of a file the experiment names at `node` (key `dotted`),
  /// read once however many trials name it; a missing, unreadable or
  /// non-regular file is an input error there, with `hint`.
  [[nodiscard]] std::string file_sha256(const std::filesystem::path& path,
                                        const std::string& dotted, const toml::node* node,
                                        const std::string& hint) const;
  void check_save_to(std::int64_t repeats) const;

  // plugin_options.cpp
  [[nodiscard]] PluginChoice resolve_plugin(const PendingPlugin& pending,
                                            const PluginCatalog& catalog) const;
  [[nodiscard]] PluginChoice default_comm_hook(const Section& distributed,
                                               const PluginCatalog& catalog) const;
  // expect.cpp
  /// Reads and checks every [[expect]] table against `kind` and the sweep;
  /// the result goes to every trial's Experiment::expectations.
  void check_expectations(RunKind kind);
  [[nodiscard]] Expectation read_expectation(const toml::node& node, std::size_t number,
                                             RunKind kind, const std::vector<std::string>& swept,
                                             const std::vector<std::vector<Leaf>>& overrides) const;
  /// A trial's value of `dotted` as TOML writes it: its override, else the
  /// base files' value; nullopt when neither writes it.
  [[nodiscard]] std::optional<std::string> value_in_trial(const std::vector<Leaf>& overrides,
                                                          const std::string& dotted) const;

  // experiment.cpp
  [[nodiscard]] Experiment resolve(const std::vector<Section>& sections,
                                   const PluginCatalog& catalog) const;

  experiment::detail::Sources sources_;
  experiment::detail::Checker check_;
  Experiment defaults_;  // defaults and where the experiment came from
  std::int64_t trials_ = 1;  // [[trial]] tables (1 without any)
  std::int64_t points_ = 1;  // points of the sweep (1 without [sweep])
  std::vector<std::filesystem::path> plugin_paths_;
  // SHA-256 of each file an experiment names by content (init_from,
  // check_against, a plugin's content() option), read once per path.
  mutable std::map<std::filesystem::path, std::string> file_sha256_;
};

}  // namespace runner
