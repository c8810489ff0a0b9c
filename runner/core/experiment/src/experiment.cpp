// Reading an experiment file (phase 1: the files, --set, every trial's
// host keys checked without plugins) and resolving it against the plugin
// catalog (phase 2). ParsedExperiment (parsed_experiment.hpp) lists the
// files that hold the rest of it.
#include "runner/experiment/experiment.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <utility>

#include "runner/common/strings.hpp"
#include "parsed_experiment.hpp"
#include "plugin_options.hpp"

namespace runner {

namespace fs = std::filesystem;

using experiment::detail::Axis;
using experiment::detail::find_key;
using experiment::detail::Leaf;
using experiment::detail::Section;
using experiment::detail::SectionSpec;
using experiment::detail::section_specs;

ParsedExperiment::ParsedExperiment(const fs::path& path,
                                   const std::vector<std::string>& set_overrides)
    : check_(path.string(), &sources_.origins) {
  experiment::detail::load_sources(path, set_overrides, sources_);
  auto source = std::make_shared<ExperimentSource>();
  source->path = path;
  source->text = sources_.files.front().text;
  source->base_files.assign(sources_.files.begin() + 1, sources_.files.end());
  source->set_overrides = set_overrides;
  defaults_.source = std::move(source);
  defaults_.name = path.stem().string();
  // The table, not the struct initialisers, is the one source of defaults.
  for (const auto& section : section_specs())
    for (const auto& key : section.keys)
      if (key.apply != nullptr && key.spec.default_value)
        key.apply(defaults_, *key.spec.default_value);

  const auto& doc = sources_.doc;
  if (doc.trials) trials_ = static_cast<std::int64_t>(doc.trials->size());
  // In doubles, so that an absurd product is reported rather than overflowed.
  double total = static_cast<double>(trials_);
  // [[trial]] alone is capped where the tables are read (document.cpp); this
  // is the cap on [sweep] and on both combined.
  for (const Axis& axis : doc.axes) {
    points_ *= static_cast<std::int64_t>(axis.size());
    total *= static_cast<double>(axis.size());
    if (total > static_cast<double>(kMaxTrials))
      throw Error(check_.nowhere(),
                  "[sweep] and [[trial]] expand to more than " + std::to_string(kMaxTrials) +
                      " trials",
                  "split the study into several experiments");
  }

  // Everything that needs no plugin is checked now, for every trial, so that
  // `runner validate` and the first run see the same problems.
  std::int64_t repeats = 1;
  RunKind kind = RunKind::train;
  for (std::int64_t index = 0; index < trial_count(); ++index) {
    const std::vector<Leaf> overrides = overrides_of(index);
    try {
      const HostConfig config = check_host(sections_of(overrides));
      if (index == 0) {
        plugin_paths_ = config.experiment.plugin_paths;
        repeats = config.experiment.repeats;  // the same for every trial
        kind = config.experiment.kind;  // likewise
      }
    } catch (const Error& e) {
      rethrow_for_trial(e, index, overrides,
                        [&] { static_cast<void>(check_host(sources_.doc.sections)); });
    }
  }
  check_save_to(repeats);
  check_expectations(kind);
  if (static_cast<double>(repeats) * static_cast<double>(trial_count()) >
      static_cast<double>(kMaxRuns)) {
    const Leaf* where = nullptr;
    for (const Section& section : sources_.doc.sections)
      if (section.name == "experiment")
        for (const Leaf& leaf : section.items)
          if (leaf.key == "repeats") where = &leaf;
    const std::string message = std::to_string(trial_count()) + " trial(s) x " +
                                std::to_string(repeats) + " repetition(s) are more than " +
                                std::to_string(kMaxRuns) + " runs";
    const std::string hint = "split the study into several experiments";
    if (where != nullptr) throw check_.error(*where->node, message, hint);
    throw Error(check_.nowhere(), message, hint);
  }
}

Experiment ParsedExperiment::resolve(const std::vector<Section>& sections,
                                     const PluginCatalog& catalog) const {
  const HostConfig config = check_host(sections);
  Experiment experiment = config.experiment;
  if (config.model) experiment.model = resolve_plugin(*config.model, catalog);
  if (config.kernel) experiment.kernel = resolve_plugin(*config.kernel, catalog);
  if (config.data) experiment.data = resolve_plugin(*config.data, catalog);
  if (config.optimizer) experiment.optimizer = resolve_plugin(*config.optimizer, catalog);
  if (config.comm_hook) {
    experiment.comm_hook = resolve_plugin(*config.comm_hook, catalog);
  } else if (config.distributed != nullptr) {
    experiment.comm_hook = default_comm_hook(*config.distributed, catalog);
  }
  return experiment;
}

// ---------------------------------------------------------------------------

std::shared_ptr<const ParsedExperiment> parse_experiment_file(
    const fs::path& path, const std::vector<std::string>& set_overrides) {
  return std::make_shared<const ParsedExperiment>(path, set_overrides);
}

std::vector<fs::path> plugin_paths_of(const ParsedExperiment& parsed) {
  return parsed.plugin_paths();
}

std::int64_t trial_count(const ParsedExperiment& parsed) { return parsed.trial_count(); }

std::vector<Expectation> file_expectations(const ParsedExperiment& parsed) {
  return parsed.expectations() ? *parsed.expectations() : std::vector<Expectation>{};
}

std::vector<Trial> expand_trials(const ParsedExperiment& parsed, const PluginCatalog& catalog) {
  return parsed.expand(catalog);
}

Experiment resolve_experiment(const ParsedExperiment& parsed, const PluginCatalog& catalog) {
  return parsed.resolve_base(catalog);
}

Experiment load_experiment(const fs::path& path, const PluginCatalog& catalog) {
  return resolve_experiment(*parse_experiment_file(path), catalog);
}

}  // namespace runner
