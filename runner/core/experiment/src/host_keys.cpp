// The host-level keys of one trial (every section but the plugins'
// options): each read against the table of sections, the sections its kind
// needs and allows, [env], and the combinations of keys that cannot run.
#include <toml++/toml.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "parsed_experiment.hpp"
#include "runner/common/json.hpp"
#include "runner/common/labels.hpp"
#include "runner/common/strings.hpp"
#include "runner/runtime/runtime.hpp"

namespace runner {

using experiment::detail::find_key;
using experiment::detail::find_section;
using experiment::detail::HostKey;
using experiment::detail::key_names;
using experiment::detail::KeyRole;
using experiment::detail::Leaf;
using experiment::detail::render;
using experiment::detail::Section;
using experiment::detail::SectionSpec;

ParsedExperiment::HostConfig ParsedExperiment::check_host(
    const std::vector<Section>& sections) const {
  HostConfig config;
  config.experiment = defaults_;
  // [experiment] first: its kind decides which other sections are allowed.
  for (const Section& section : sections)
    if (section.name == "experiment") read_section(section, config);
  const RunKind kind = config.experiment.kind;
  for (const Section& section : sections) {
    const SectionSpec& spec = *find_section(section.name);
    if (spec.kinds.empty() ||
        std::find(spec.kinds.begin(), spec.kinds.end(), kind) != spec.kinds.end())
      continue;
    std::vector<std::string> valid;
    for (const RunKind k : spec.kinds) valid.push_back(std::string("\"") + to_string(k) + "\"");
    const std::string fix = "this experiment has kind = \"" + std::string(to_string(kind)) +
                            "\"; remove [" + spec.name + "] or set kind = " +
                            join(valid, " or ") + " in [experiment]";
    if (spec.kinds.size() == 1)
      throw check_.error(section.key_src, *section.node,
                         "section [" + spec.name + "] is only used by " +
                             to_string(spec.kinds.front()) + " experiments",
                         fix);
    throw check_.error(section.key_src, *section.node,
                       "section [" + spec.name + "] is not used by " + to_string(kind) +
                           " experiments",
                       fix);
  }
  for (const Section& section : sections)
    if (section.name != "experiment") read_section(section, config);
  check_required_sections(config);
  check_runtime(config.experiment);
  check_weights(sections, config);
  check_key_combinations(config.experiment);
  if (config.experiment.auto_repeats) config.experiment.repeats = config.experiment.max_repeats;
  return config;
}

// min_repeats, max_repeats and time_budget shape repeats = "auto" only.
template <typename Fail>
void check_auto_repeats(const Experiment& e, const Fail& fail_at) {
  if (!e.auto_repeats) {
    for (const char* key : {"min_repeats", "max_repeats", "time_budget"})
      if (e.key_where.count(std::string("experiment.") + key) != 0)
        fail_at(std::string("experiment.") + key,
                std::string("'experiment.") + key + "' is only read with repeats = \"auto\"",
                "set repeats = \"auto\" to stop the rounds when the answer is known, or remove " +
                    std::string(key));
    return;
  }
  if (e.min_repeats > e.max_repeats)
    fail_at(e.key_where.count("experiment.min_repeats") != 0 ? "experiment.min_repeats"
                                                              : "experiment.max_repeats",
            "'experiment.min_repeats' (" + std::to_string(e.min_repeats) +
                ") is more than 'experiment.max_repeats' (" + std::to_string(e.max_repeats) + ")",
            "the rounds run from min_repeats to at most max_repeats");
}

// Combinations of host keys that cannot run, each reported at the key that
// makes it impossible.
void ParsedExperiment::check_key_combinations(const Experiment& e) const {
  const auto fail_at = [&](const std::string& dotted, const std::string& message,
                           const std::string& hint) {
    const auto it = e.key_where.find(dotted);
    throw Error(it != e.key_where.end() ? it->second : check_.nowhere(), message, hint);
  };
  check_auto_repeats(e, fail_at);
  if (e.device.type == "cpu")
    for (const std::string& key : e.device.cuda_only_keys())
      fail_at(key, "'" + key + "' is a CUDA setting, but device.type = \"cpu\"",
              "remove it, or run on a GPU with device.type = \"cuda\" (or \"auto\")");
  if (e.kind != RunKind::train || !e.schedule.enabled) return;
  const ScheduleSettings& s = e.schedule;
  // Keys of one type only: a value the schedule ignores is a mistake.
  const std::vector<std::pair<std::string, std::vector<std::string>>> own_keys{
      {"step", {"step_size", "gamma"}},
      {"cosine", {"min_lr"}},
      {"one_cycle",
       {"pct_start", "anneal", "div_factor", "final_div_factor", "three_phase", "cycle_momentum",
        "base_momentum", "max_momentum"}}};
  for (const auto& [type, keys] : own_keys) {
    if (type == s.type) continue;
    for (const std::string& key : keys)
      if (e.key_where.count("schedule." + key) != 0)
        fail_at("schedule." + key,
                "'schedule." + key + "' is used by type = \"" + type + "\", but type = \"" +
                    s.type + "\"",
                "remove it, or set schedule.type = \"" + type + "\"");
  }
  if (s.type == "step" && s.step_size < 1)
    fail_at("schedule.type", "schedule type \"step\" needs 'schedule.step_size'",
            "add step_size = N: the lr is multiplied by gamma every N optimizer steps");
  if (s.type == "one_cycle" && s.warmup_steps > 0)
    fail_at("schedule.warmup_steps",
            "'schedule.warmup_steps' does not apply to type = \"one_cycle\", which warms up "
            "by itself",
            "remove warmup_steps; pct_start sets the fraction of steps the lr rises");
  if (s.type == "one_cycle" && s.base_momentum > s.max_momentum)
    fail_at("schedule.base_momentum",
            "'schedule.base_momentum' (" + experiment::detail::shortest(s.base_momentum) +
                ") is above 'schedule.max_momentum' (" +
                experiment::detail::shortest(s.max_momentum) + ")",
            "the momentum falls from max_momentum to base_momentum while the lr rises");
  const std::int64_t total = e.total_train_steps();
  if (s.warmup_steps >= total)
    fail_at("schedule.warmup_steps",
            "'schedule.warmup_steps' is " + std::to_string(s.warmup_steps) +
                ", but the run takes " + std::to_string(total) +
                " optimizer steps (train.warmup + " +
                (e.profile.enabled() ? "profile.steps + " : "") + "train.steps)",
            "make the warm-up shorter than the run");
}

void ParsedExperiment::read_section(const Section& section, HostConfig& config) const {
  const SectionSpec& spec = *find_section(section.name);
  if (spec.name == "distributed") {
    config.distributed = &section;
    config.experiment.distributed.enabled = true;
  }
  if (spec.name == "eval") config.experiment.eval.enabled = true;
  if (spec.name == "schedule") config.experiment.schedule.enabled = true;
  if (spec.environment) {
    read_environment(section, config.experiment);
    return;
  }
  PendingPlugin pending{&spec, &section, {}, nullptr};
  for (const Leaf& item : section.items) {
    const std::string dotted = spec.name + "." + item.key;
    if (spec.plugin && item.key == "plugin") {
      const auto* name = item.node->as_string();
      if (name == nullptr)
        check_.fail(*item.node, "'" + dotted + "' must be a string, found " +
                                    experiment::detail::describe(*item.node));
      if (name->get().empty()) check_.fail(*item.node, "'" + dotted + "' must not be empty");
      pending.name = name->get();
      pending.name_node = item.node;
      continue;
    }
    const HostKey* host = find_key(spec, item.key);
    if (host == nullptr) {
      if (spec.plugin) continue;  // a plugin option, checked in phase 2
      std::string message = "unknown key '" + terminal_safe(item.key) + "' in [" + spec.name + "]";
      if (const auto match = closest_match(item.key, key_names(spec)))
        message += "; did you mean '" + *match + "'?";
      throw check_.error(item, message,
                         "keys of [" + spec.name + "]: " + join(key_names(spec), ", "));
    }
    config.experiment.key_where[dotted] = check_.at(*item.node);
    switch (host->role) {
      case KeyRole::path_list:
        read_path_list(*item.node, dotted, config.experiment);
        break;
      case KeyRole::path:
        host->apply(config.experiment, OptionValue{read_path(*item.node, dotted)});
        break;
      case KeyRole::duration:
        host->apply(config.experiment, OptionValue{check_.read_duration(*item.node, dotted, *host->spec.min, *host->spec.max)});
        break;
      case KeyRole::warmup:
        host->apply(config.experiment, OptionValue{check_.read_warmup(*item.node, dotted)});
        break;
      case KeyRole::repeats:
        host->apply(config.experiment, OptionValue{check_.read_repeats(*item.node, dotted)});
        break;
      case KeyRole::labels:
        read_labels(*item.node, dotted, config.experiment);
        break;
      case KeyRole::value: {
        const OptionValue value = check_.read(host->spec, *item.node, dotted, {});
        if (host->non_empty && std::get<std::string>(value).empty())
          check_.fail(*item.node, "'" + dotted + "' must not be empty");
        if (host->printable && has_control_character(std::get<std::string>(value)))
          check_.fail(*item.node,
                      "'" + dotted + "' must not contain control characters, found " +
                          json_quote(std::get<std::string>(value)),
                      "a name is printed in tables and terminals; use letters, digits and "
                      "punctuation");
        if (host->positive && std::get<double>(value) <= 0)
          check_.fail(*item.node, "'" + dotted + "' must be > 0, found " +
                                      experiment::detail::shortest(std::get<double>(value)));
        host->apply(config.experiment, value);
        break;
      }
    }
  }
  if (!spec.plugin) return;
  if (pending.name.empty())
    throw check_.error(section.key_src, *section.node,
                       "missing required key 'plugin' in [" + spec.name + "]",
                       "name the " + std::string(to_string(*spec.plugin)) +
                           " plugin, e.g. plugin = \"...\"; run 'runner plugins' to see what is "
                           "loaded");
  switch (*spec.plugin) {
    case PluginKind::model: config.model = pending; break;
    case PluginKind::loader: config.data = pending; break;
    case PluginKind::optimizer: config.optimizer = pending; break;
    case PluginKind::comm_hook: config.comm_hook = pending; break;
    case PluginKind::kernel: config.kernel = pending; break;
  }
}

// [env]: NAME = "value", every value text (the environment has no other type).
void ParsedExperiment::read_environment(const Section& section, Experiment& e) const {
  for (const Leaf& item : section.items) {
    const std::string dotted = "env." + item.key;
    if (!is_environment_name(item.key))
      throw check_.error(item, "'" + dotted + "' is not an environment variable name",
                         "names are letters, digits and underscores, not starting with a "
                         "digit; a name with other characters must be quoted in TOML and "
                         "still cannot be set");
    if (item.key.rfind("RUNNER_", 0) == 0)
      throw check_.error(item, "'" + dotted + "' is a setting of runner itself, not of a run",
                         "set it in the shell that starts runner");
    const auto* text = item.node->as_string();
    if (text == nullptr)
      check_.fail(*item.node,
                  "'" + dotted + "' must be a string, found " +
                      experiment::detail::describe(*item.node),
                  "environment values are text: write " + item.key + " = \"" +
                      (item.node->is_value() ? render(*item.node) : std::string("...")) +
                      "\"");
    if (text->get().find('\0') != std::string::npos)
      check_.fail(*item.node, "'" + dotted + "' must not contain a NUL character");
    e.env[item.key] = text->get();
    e.key_where[dotted] = check_.at(*item.node);
  }
}

// [experiment] labels = { KEY = "value" }: the rules of --label (labels.hpp),
// each reported at its own key.
void ParsedExperiment::read_labels(const toml::node& node, const std::string& dotted,
                                   Experiment& e) const {
  const char* const hint = "write labels = { commit = \"abc123\", branch = \"main\" }";
  const auto* table = node.as_table();
  if (table == nullptr)
    check_.fail(node, "'" + dotted + "' must be a table of KEY = \"value\", found " +
                          experiment::detail::describe(node), hint);
  e.labels.clear();  // a base file's labels are replaced, as any other value
  for (const auto& [key, value] : *table) {
    const std::string name(key.str());
    const std::string at = dotted + "." + name;
    // A bad key is reported at its value, as every other error here.
    if (const std::string p = label_key_problem(name); !p.empty())
      check_.fail(value, "label key '" + terminal_safe(name) + "' in '" + dotted + "' " + p,
                  "a key is a letter followed by letters, digits, '_', '-' or '.'");
    const auto* text = value.as_string();
    if (text == nullptr)
      check_.fail(value, "'" + at + "' must be a string, found " +
                             experiment::detail::describe(value),
                  "label values are text: write " + name + " = \"" +
                      (value.is_value() ? render(value) : std::string("...")) + "\"");
    if (const std::string p = label_value_problem(text->get()); !p.empty())
      check_.fail(value, "'" + at + "' " + p, "a value is one line of printable text");
    e.labels[name] = text->get();
  }
  if (e.labels.size() > kMaxLabels)
    check_.fail(node, "'" + dotted + "' has " + std::to_string(e.labels.size()) +
                          " labels, at most " + std::to_string(kMaxLabels));
}

void ParsedExperiment::check_required_sections(const HostConfig& config) const {
  if (config.experiment.kind == RunKind::kernel) {
    if (!config.kernel)
      throw Error(check_.nowhere(), "kernel experiments need a [kernel] section",
                  "add [kernel] with a kernel plugin and a shape (e.g. plugin = \"scale\", "
                  "shape = [4096, 4096]); run 'runner plugins' to see the kernels loaded");
    const KernelSettings& k = config.experiment.kernel_settings;
    if (k.shape.empty())
      throw check_.error(config.kernel->section->key_src, *config.kernel->section->node,
                         "missing required key 'shape' in [kernel]",
                         "give the input shape the kernel is timed at, e.g. shape = [4096, 4096]");
    std::int64_t elements = 1;
    for (const std::int64_t n : k.shape) {
      if (elements > kMaxKernelElements / n) {
        elements = kMaxKernelElements + 1;
        break;
      }
      elements *= n;
    }
    if (elements > kMaxKernelElements)
      throw Error(config.experiment.where_of("kernel.shape"),
                  "kernel.shape has more than " + std::to_string(kMaxKernelElements) +
                      " elements",
                  "a kernel is timed on one device's memory; use a smaller shape");
    return;
  }
  if (!config.model)
    throw Error(check_.nowhere(), "missing section [model]",
                "every experiment names its model: [model] plugin = \"...\"; "
                "run 'runner plugins' to see what is loaded");
  if (config.comm_hook && config.distributed == nullptr)
    throw check_.error(config.comm_hook->section->key_src, *config.comm_hook->section->node,
                       "section [comm_hook] needs a [distributed] section",
                       "a communication hook reduces gradients across ranks: add [distributed] "
                       "with world_size = N, or remove [comm_hook]");
  if (config.distributed != nullptr) check_backend(config);
  if (config.experiment.kind != RunKind::train) return;
  if (!config.data)
    throw Error(check_.nowhere(), "train experiments need a [data] section",
                "add [data] with a loader plugin (e.g. plugin = \"synthetic\"), "
                "or set kind = \"infer\" in [experiment]");
  if (!config.optimizer)
    throw Error(check_.nowhere(), "train experiments need an [optimizer] section",
                "add [optimizer] with an optimizer plugin (e.g. plugin = \"sgd\"), "
                "or set kind = \"infer\" in [experiment]");
}

}  // namespace runner
