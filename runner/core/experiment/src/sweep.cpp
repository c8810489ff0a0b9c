// Trial expansion: where a sweep is expanded. [sweep] axes and [[trial]]
// tables make one configuration per point (the last axis varying fastest);
// each is resolved against the plugin catalog, named by what it varies, and
// refused when two are the same configuration.
#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "parsed_experiment.hpp"
#include "runner/common/strings.hpp"

namespace runner {

using experiment::detail::apply_override;
using experiment::detail::Leaf;
using experiment::detail::render;
using experiment::detail::Section;

namespace {

std::string label_of(const std::vector<std::pair<std::string, std::string>>& varied) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : varied) parts.push_back(key + "=" + value);
  return join(parts, " ");
}

std::vector<std::pair<std::string, std::string>> varied_of(const std::vector<Leaf>& overrides) {
  std::vector<std::pair<std::string, std::string>> varied;
  for (const Leaf& leaf : overrides) varied.emplace_back(leaf.key, render(*leaf.node));
  return varied;
}

std::string trial_name(std::int64_t index, const std::string& label) {
  return "trial " + std::to_string(index + 1) + " (" +
         (label.empty() ? std::string("base configuration") : label) + ")";
}

}  // namespace

std::vector<Leaf> ParsedExperiment::overrides_of(std::int64_t index) const {
  const auto& doc = sources_.doc;
  std::vector<Leaf> out;
  if (doc.trials) {
    const auto& trial = (*doc.trials)[static_cast<std::size_t>(index / points_)];
    out = trial.overrides;
  }
  // Mixed radix, the last axis varying fastest.
  std::size_t rest = static_cast<std::size_t>(index % points_);
  std::vector<std::size_t> picks(doc.axes.size());
  for (std::size_t i = doc.axes.size(); i-- > 0;) {
    picks[i] = rest % doc.axes[i].size();
    rest /= doc.axes[i].size();
  }
  for (std::size_t i = 0; i < doc.axes.size(); ++i)
    for (const Leaf& key : doc.axes[i].keys)
      out.push_back(Leaf{key.key, key.key_src, key.node->as_array()->get(picks[i])});
  return out;
}

std::vector<Section> ParsedExperiment::sections_of(const std::vector<Leaf>& overrides) const {
  std::vector<Section> sections = sources_.doc.sections;
  for (const Leaf& leaf : overrides) apply_override(sections, leaf);
  return sections;
}

void ParsedExperiment::rethrow_for_trial(const Error& error, std::int64_t index,
                                         const std::vector<Leaf>& overrides,
                                         const std::function<void()>& base_check) const {
  // A problem of the first trial that the base configuration has too is the
  // files' fault, shared by every trial: naming a trial would mislead. A later
  // trial's problem is its own, since the trials before it passed.
  if (index == 0) {
    try {
      base_check();
    } catch (const Error& base) {
      if (std::string(base.what()) == error.what()) throw base;
    }
  }
  const std::string label = label_of(varied_of(overrides));
  throw Error(std::string(error.what()) + " (in trial " + std::to_string(index + 1) + ": " +
                  (label.empty() ? std::string("base configuration") : label) + ")",
              error.hint());
}

std::vector<Trial> ParsedExperiment::expand(const PluginCatalog& catalog) const {
  std::vector<Trial> trials;
  trials.reserve(static_cast<std::size_t>(trial_count()));
  std::map<std::string, std::int64_t> by_hash;
  for (std::int64_t index = 0; index < trial_count(); ++index) {
    const std::vector<Leaf> overrides = overrides_of(index);
    Trial trial;
    trial.index = index;
    trial.varied = varied_of(overrides);
    trial.label = label_of(trial.varied);
    try {
      trial.experiment = resolve(sections_of(overrides), catalog);
    } catch (const Error& e) {
      rethrow_for_trial(e, index, overrides, [&] { static_cast<void>(resolve_base(catalog)); });
    }
    trial.experiment.train.save_to =
        replace_all(trial.experiment.train.save_to, "{trial}", std::to_string(index + 1));
    // Trials are identified by their configuration: two equal ones would share results.
    const auto [it, added] = by_hash.emplace(trial.experiment.config_hash(), index);
    if (!added) {
      const Trial& first = trials[static_cast<std::size_t>(it->second)];
      throw Error(check_.nowhere(),
                  trial_name(index, trial.label) + " has the same configuration as " +
                      trial_name(first.index, first.label),
                  "remove one of them; for more runs of one configuration, raise [experiment] "
                  "repeats");
    }
    trials.push_back(std::move(trial));
  }
  return trials;
}

}  // namespace runner
