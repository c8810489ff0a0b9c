#include "runner/experiment/experiment.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <utility>

#include "runner/common/json.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/runtime/runtime.hpp"
#include "document.hpp"
#include "format.hpp"

namespace runner {

namespace fs = std::filesystem;

using experiment_detail::apply_override;
using experiment_detail::Axis;
using experiment_detail::Checker;
using experiment_detail::find_key;
using experiment_detail::find_section;
using experiment_detail::HostKey;
using experiment_detail::key_names;
using experiment_detail::KeyRole;
using experiment_detail::Leaf;
using experiment_detail::render;
using experiment_detail::Section;
using experiment_detail::SectionSpec;
using experiment_detail::section_specs;
using experiment_detail::Sources;

namespace {

// ---------------------------------------------------------------------------
// Messages and labels.

std::string describe_hint(const std::string& plugin) {
  return "run 'runner plugins describe " + plugin + "' to see its options";
}

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

// ---------------------------------------------------------------------------

/// Phase-1 result: the merged files with --set applied, every trial's
/// host-level settings checked, plugin tables kept raw. Not copyable: the
/// document points into the TOML trees it owns.
class ParsedExperiment {
 public:
  ParsedExperiment(const fs::path& path, const std::vector<std::string>& set_overrides);
  ParsedExperiment(const ParsedExperiment&) = delete;
  ParsedExperiment& operator=(const ParsedExperiment&) = delete;

  [[nodiscard]] const std::vector<fs::path>& plugin_paths() const { return plugin_paths_; }
  [[nodiscard]] std::int64_t trial_count() const { return trials_ * points_; }
  [[nodiscard]] Experiment resolve_base(const PluginCatalog& catalog) const {
    return resolve(sources_.doc.sections, catalog);
  }
  [[nodiscard]] std::vector<Trial> expand(const PluginCatalog& catalog) const;

 private:
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

  [[nodiscard]] std::vector<Leaf> overrides_of(std::int64_t index) const;
  [[nodiscard]] std::vector<Section> sections_of(const std::vector<Leaf>& overrides) const;
  [[nodiscard]] HostConfig check_host(const std::vector<Section>& sections) const;
  void read_section(const Section& section, HostConfig& config) const;
  void read_path_list(const toml::node& node, const std::string& dotted, Experiment& e) const;
  [[nodiscard]] std::string read_path(const toml::node& node, const std::string& dotted) const;
  /// A path option's value (string or list of strings), made absolute like read_path.
  [[nodiscard]] OptionValue resolve_paths(const OptionValue& value, const toml::node& node) const;
  void check_weights(const std::vector<Section>& sections, HostConfig& config) const;
  void read_environment(const Section& section, Experiment& e) const;
  void check_runtime(Experiment& e) const;
  /// The SHA-256 of a file the experiment names at `node` (key `dotted`),
  /// read once however many trials name it; a missing, unreadable or
  /// non-regular file is an input error there, with `hint`.
  [[nodiscard]] std::string file_sha256(const fs::path& path, const std::string& dotted,
                                        const toml::node* node, const std::string& hint) const;
  void check_save_to(std::int64_t repeats) const;
  void check_required_sections(const HostConfig& config) const;
  void check_recipe(const Experiment& e) const;
  void check_backend(const HostConfig& config) const;
  [[nodiscard]] PluginChoice resolve_plugin(const PendingPlugin& pending,
                                            const PluginCatalog& catalog) const;
  [[nodiscard]] PluginChoice default_comm_hook(const Section& distributed,
                                               const PluginCatalog& catalog) const;
  [[nodiscard]] Experiment resolve(const std::vector<Section>& sections,
                                   const PluginCatalog& catalog) const;
  template <typename BaseCheck>
  [[noreturn]] void rethrow_for_trial(const Error& error, std::int64_t index,
                                      const std::vector<Leaf>& overrides,
                                      BaseCheck base_check) const;

  Sources sources_;
  Checker check_;
  Experiment defaults_;  // defaults and where the experiment came from
  std::int64_t trials_ = 1;  // [[trial]] tables (1 without any)
  std::int64_t points_ = 1;  // points of the sweep (1 without [sweep])
  std::vector<fs::path> plugin_paths_;
  // SHA-256 of each file an experiment names by content (init_from,
  // check_against, a plugin's content() option), read once per path.
  mutable std::map<fs::path, std::string> file_sha256_;
};

ParsedExperiment::ParsedExperiment(const fs::path& path,
                                   const std::vector<std::string>& set_overrides)
    : check_(path.string(), &sources_.origins) {
  experiment_detail::load_sources(path, set_overrides, sources_);
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
  for (std::int64_t index = 0; index < trial_count(); ++index) {
    const std::vector<Leaf> overrides = overrides_of(index);
    try {
      const HostConfig config = check_host(sections_of(overrides));
      if (index == 0) {
        plugin_paths_ = config.experiment.plugin_paths;
        repeats = config.experiment.repeats;  // the same for every trial
      }
    } catch (const Error& e) {
      rethrow_for_trial(e, index, overrides,
                        [&] { static_cast<void>(check_host(sources_.doc.sections)); });
    }
  }
  check_save_to(repeats);
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

template <typename BaseCheck>
void ParsedExperiment::rethrow_for_trial(const Error& error, std::int64_t index,
                                         const std::vector<Leaf>& overrides,
                                         BaseCheck base_check) const {
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
  check_recipe(config.experiment);
  return config;
}

// Combinations of host keys that cannot run, each reported at the key that
// makes it impossible.
void ParsedExperiment::check_recipe(const Experiment& e) const {
  const auto fail_at = [&](const std::string& dotted, const std::string& message,
                           const std::string& hint) {
    const auto it = e.key_where.find(dotted);
    throw Error(it != e.key_where.end() ? it->second : check_.nowhere(), message, hint);
  };
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
            "'schedule.base_momentum' (" + experiment_detail::shortest(s.base_momentum) +
                ") is above 'schedule.max_momentum' (" +
                experiment_detail::shortest(s.max_momentum) + ")",
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
                                    experiment_detail::describe(*item.node));
      if (name->get().empty()) check_.fail(*item.node, "'" + dotted + "' must not be empty");
      pending.name = name->get();
      pending.name_node = item.node;
      continue;
    }
    const HostKey* host = find_key(spec, item.key);
    if (host == nullptr) {
      if (spec.plugin) continue;  // a plugin option, checked in phase 2
      std::string message = "unknown key '" + item.key + "' in [" + spec.name + "]";
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
        host->apply(config.experiment, OptionValue{check_.read_duration(*item.node, dotted, *host->spec.max)});
        break;
      case KeyRole::warmup:
        host->apply(config.experiment, OptionValue{check_.read_warmup(*item.node, dotted)});
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
                                      experiment_detail::shortest(std::get<double>(value)));
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
                      experiment_detail::describe(*item.node),
                  "environment values are text: write " + item.key + " = \"" +
                      (item.node->is_value() ? render(*item.node) : std::string("...")) +
                      "\"");
    if (text->get().find('\0') != std::string::npos)
      check_.fail(*item.node, "'" + dotted + "' must not contain a NUL character");
    e.env[item.key] = text->get();
    e.key_where[dotted] = check_.at(*item.node);
  }
}

// What [runtime] asks of this machine: the allocator's library installed, the
// CPUs and the NUMA node present. Each problem is reported at its key.
void ParsedExperiment::check_runtime(Experiment& e) const {
  const auto fail_at = [&](const std::string& dotted, const std::string& message,
                           const std::string& hint) {
    const auto it = e.key_where.find(dotted);
    throw Error(it != e.key_where.end() ? it->second : check_.nowhere(), message, hint);
  };
  for (const char* key : {"threads", "interop_threads"})
    if (e.key_where.count(std::string("runtime.") + key) != 0 &&
        e.key_where.count(std::string("device.") + key) != 0)
      fail_at(std::string("runtime.") + key,
              std::string("'runtime.") + key + "' and 'device." + key +
                  "' are the same setting; set it once",
              std::string("remove one of them (runtime.") + key + " is the documented place)");
  RuntimeSettings& r = e.runtime;
  if (r.allocator != "system" && !allocator_preload_possible())
    fail_at("runtime.allocator",
            "runtime.allocator = \"" + r.allocator +
                "\" cannot be preloaded into this runner: it is built with AddressSanitizer, "
                "which replaces malloc itself",
            "use a build without sanitizers (scripts/dev build) to compare allocators");
  if (r.allocator != "system" && !find_allocator_library(r.allocator)) {
    const auto [message, hint] = allocator_missing(r.allocator);
    fail_at("runtime.allocator", message, hint);
  }
  // Checked for every trial of a sweep: the system is asked only when the
  // trial binds to something.
  std::vector<int> cpus;
  if (!r.cpu_affinity.empty()) {
    const std::vector<int> allowed = allowed_cpus();
    try {
      cpus = parse_cpu_list(r.cpu_affinity);
    } catch (const Error& error) {
      fail_at("runtime.cpu_affinity", "'runtime.cpu_affinity': " + std::string(error.what()),
              error.hint());
    }
    for (int cpu : cpus)
      if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
        fail_at("runtime.cpu_affinity",
                "'runtime.cpu_affinity' names CPU " + std::to_string(cpu) +
                    ", which this machine does not have (runner may use CPUs " +
                    format_cpu_list(allowed) + ")",
                "name CPUs from " + format_cpu_list(allowed));
    r.cpu_affinity = format_cpu_list(cpus);
  }
  if (r.numa_node >= 0) {
    const auto nodes = numa_nodes();
    std::vector<int> names;
    for (const auto& [node, node_cpus] : nodes) names.push_back(node);
    const auto it = nodes.find(static_cast<int>(r.numa_node));
    if (it == nodes.end())
      fail_at("runtime.numa_node",
              "'runtime.numa_node' is " + std::to_string(r.numa_node) + ", but " +
                  (nodes.empty() ? std::string("the kernel reports no NUMA nodes on this machine")
                                 : "this machine has NUMA node(s) " + format_cpu_list(names)),
              nodes.empty() ? "remove numa_node" : "use one of " + format_cpu_list(names));
    for (int cpu : cpus)
      if (std::find(it->second.begin(), it->second.end(), cpu) == it->second.end())
        fail_at("runtime.cpu_affinity",
                "'runtime.cpu_affinity' names CPU " + std::to_string(cpu) +
                    ", which is not on NUMA node " + std::to_string(r.numa_node) + " (CPUs " +
                    format_cpu_list(it->second) + ")",
                "name CPUs of the node, or leave cpu_affinity out to use all of them");
  }
}

// The weights file must be there now (a missing file is an input error, not a
// failed run), and its bytes join the trial's identity. Its contents are
// checked against the model before any run starts (the engine's preflight).
// The same for the reference outputs of check_against.
void ParsedExperiment::check_weights(const std::vector<Section>& sections,
                                     HostConfig& config) const {
  ModelSettings& model = config.experiment.model_settings;
  const auto node_of = [&](const std::string& key) -> const toml::node* {
    const toml::node* where = nullptr;
    for (const Section& section : sections)
      if (section.name == "model")
        for (const Leaf& leaf : section.items)
          if (leaf.key == key) where = leaf.node;
    return where;
  };
  if (!model.init_from.empty())
    model.init_from_sha256 = file_sha256(
        model.init_from, "model.init_from", node_of("init_from"),
        "give a .safetensors file or a state dict saved with torch.save(model.state_dict(), "
        "path); a relative path is relative to the file that writes it");
  if (!model.check_against.empty())
    model.check_against_sha256 = file_sha256(
        model.check_against, "model.check_against", node_of("check_against"),
        "give the .reference.safetensors file runner-export writes (tensors 'input' and "
        "'output'); a relative path is relative to the file that writes it");
}

std::string ParsedExperiment::file_sha256(const fs::path& path, const std::string& dotted,
                                          const toml::node* node, const std::string& hint) const {
  const auto fail = [&](const std::string& what) {
    const std::string message = dotted + " names '" + path.string() + "', " + what;
    if (node != nullptr) throw check_.error(*node, message, hint);
    throw Error(check_.nowhere(), message, hint);
  };
  if (const auto cached = file_sha256_.find(path); cached != file_sha256_.end())
    return cached->second;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) fail("which does not exist");
  if (fs::is_directory(status)) fail("which is a directory");
  if (!fs::is_regular_file(status)) fail("which is not a regular file");
  std::string sha;
  try {
    sha = sha256_file_hex(path);
  } catch (const Error& e) {
    fail(std::string("which cannot be read: ") + e.what());
  }
  file_sha256_.emplace(path, sha);
  return sha;
}

// One save_to file per run: with several trials or repetitions the name must
// tell them apart, or the last run would overwrite the others.
void ParsedExperiment::check_save_to(std::int64_t repeats) const {
  for (const Section& section : sources_.doc.sections) {
    if (section.name != "train") continue;
    for (const Leaf& leaf : section.items) {
      if (leaf.key != "save_to" || leaf.node->as_string() == nullptr) continue;
      const std::string& text = leaf.node->as_string()->get();
      std::vector<std::string> missing;
      if (trial_count() > 1 && text.find("{trial}") == std::string::npos)
        missing.emplace_back("{trial}");
      if (repeats > 1 && text.find("{repeat}") == std::string::npos)
        missing.emplace_back("{repeat}");
      if (!missing.empty())
        throw check_.error(*leaf.node,
                           "'train.save_to' names one file for " +
                               std::to_string(trial_count()) + " trial(s) x " +
                               std::to_string(repeats) +
                               " repetition(s): every run would overwrite it",
                           "put " + join(missing, " and ") +
                               " in the name, e.g. save_to = \"weights-{trial}-{repeat}.safetensors\"");
    }
  }
}

std::string ParsedExperiment::read_path(const toml::node& node, const std::string& dotted) const {
  const auto* text = node.as_string();
  if (text == nullptr)
    check_.fail(node, "'" + dotted + "' must be a string, found " +
                          experiment_detail::describe(node));
  if (text->get().empty()) check_.fail(node, "'" + dotted + "' must not be empty");
  fs::path p(text->get());
  if (p.is_relative()) {
    const auto* origin = check_.origin_of(node);
    p = (origin != nullptr ? origin->folder : defaults_.source->path.parent_path()) / p;
  }
  return fs::absolute(p).lexically_normal().string();
}

OptionValue ParsedExperiment::resolve_paths(const OptionValue& value,
                                            const toml::node& node) const {
  const auto* origin = check_.origin_of(node);
  const fs::path folder = origin != nullptr ? origin->folder : defaults_.source->path.parent_path();
  auto resolve = [&](const std::string& text) {
    fs::path p(text);
    if (!text.empty() && p.is_relative()) p = folder / p;
    return text.empty() ? text : fs::absolute(p).lexically_normal().string();
  };
  if (const auto* one = std::get_if<std::string>(&value)) return OptionValue{resolve(*one)};
  if (const auto* many = std::get_if<std::vector<std::string>>(&value)) {
    std::vector<std::string> out;
    for (const auto& text : *many) out.push_back(resolve(text));
    return OptionValue{std::move(out)};
  }
  return value;
}

void ParsedExperiment::read_path_list(const toml::node& node, const std::string& dotted,
                                      Experiment& e) const {
  // Relative to the file that writes the path, so an experiment and its
  // plugins move together; a --set path is relative to the working directory.
  const auto* origin = check_.origin_of(node);
  const fs::path folder = origin != nullptr ? origin->folder : e.source->path.parent_path();
  auto add = [&](const toml::node& item, const std::string& name) {
    const auto* text = item.as_string();
    if (text == nullptr)
      check_.fail(item, "'" + name + "' must be a string, found " +
                            experiment_detail::describe(item));
    if (text->get().empty()) check_.fail(item, "'" + name + "' must not be empty");
    fs::path p(text->get());
    if (p.is_relative()) p = folder / p;
    e.plugin_paths.push_back(fs::absolute(p).lexically_normal());
  };
  e.plugin_paths.clear();  // an extending file's list replaces the base's
  if (node.is_string()) {
    add(node, dotted);
    return;
  }
  const auto* array = node.as_array();
  if (array == nullptr)
    check_.fail(node, "'" + dotted + "' must be a string or a list of strings, found " +
                          experiment_detail::describe(node));
  for (std::size_t i = 0; i < array->size(); ++i)
    add(*array->get(i), dotted + "[" + std::to_string(i) + "]");
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

void ParsedExperiment::check_backend(const HostConfig& config) const {
  // gloo reduces CPU tensors here and nccl CUDA tensors; "auto" is decided at run time.
  const std::string& backend = config.experiment.distributed.backend;
  const std::string& device = config.experiment.device.type;
  const bool mismatch = (backend == "gloo" && device == "cuda") || (backend == "nccl" && device == "cpu");
  if (!mismatch) return;
  const Section& section = *config.distributed;
  const std::string other = backend == "gloo" ? "nccl" : "gloo";
  const std::string message = "[distributed] backend \"" + backend + "\" does not work with device.type = \"" +
                              device + "\"";
  const std::string hint = "use backend = \"" + other + "\" for device.type = \"" + device +
                           "\" (gloo: CPU tensors, nccl: CUDA tensors)";
  for (const Leaf& item : section.items)
    if (item.key == "backend") throw check_.error(item, message, hint);
  throw check_.error(section.key_src, *section.node, message, hint);
}

PluginChoice ParsedExperiment::resolve_plugin(const PendingPlugin& pending,
                                              const PluginCatalog& catalog) const {
  const SectionSpec& spec = *pending.spec;
  const Section& section = *pending.section;
  const PluginKind kind = *spec.plugin;
  const std::string kind_name = to_string(kind);

  const PluginDescriptor* plugin = catalog.find(kind, pending.name);
  if (plugin == nullptr) {
    const std::vector<std::string> available = catalog.names(kind);
    std::string message = "unknown " + kind_name + " plugin '" + pending.name + "'";
    if (const auto match = closest_match(pending.name, available))
      message += "; did you mean '" + *match + "'?";
    const std::string hint =
        available.empty()
            ? "no " + kind_name +
                  " plugins are loaded; point RUNNER_PLUGIN_PATH, [plugins] path or "
                  "--plugin-path at the folder that holds them"
            : "available " + kind_name + " plugins: " + join(available, ", ") +
                  "; run 'runner plugins' to see what is loaded";
    throw check_.error(*pending.name_node, message, hint);
  }

  std::string hint = describe_hint(plugin->name);
  std::vector<std::string> host_keys;
  for (const auto& key : spec.keys) host_keys.push_back(key.spec.name);
  if (!host_keys.empty()) hint += "; [" + spec.name + "] also takes " + join(host_keys, ", ");

  std::vector<std::string> candidates;
  for (const auto& option : plugin->schema.specs()) candidates.push_back(option.name);
  for (const auto& key : spec.keys) candidates.push_back(key.spec.name);

  std::map<std::string, OptionValue> values;
  std::map<std::string, SourceLocation> where;
  std::map<std::string, std::string> content;
  for (const Leaf& item : section.items) {
    if (item.key == "plugin" || find_key(spec, item.key) != nullptr) continue;
    const OptionSpec* option = plugin->schema.find(item.key);
    if (option == nullptr) {
      std::string message =
          "unknown option '" + item.key + "' for " + kind_name + " plugin '" + plugin->name + "'";
      if (const auto match = closest_match(item.key, candidates))
        message += "; did you mean '" + *match + "'?";
      throw check_.error(item, message, hint);
    }
    values[item.key] = check_.read(*option, *item.node, spec.name + "." + item.key, hint);
    if (option->is_path) values[item.key] = resolve_paths(values[item.key], *item.node);
    where[item.key] = check_.at(*item.node);
    if (option->by_content)
      if (const auto* file = std::get_if<std::string>(&values[item.key]); file && !file->empty())
        content[item.key] = file_sha256(*file, spec.name + "." + item.key, item.node,
                                        "the file's bytes identify the trial; a relative path "
                                        "is relative to the file that writes it");
  }
  for (const auto& option : plugin->schema.specs()) {
    if (values.count(option.name) != 0) continue;
    if (!option.default_value)
      throw check_.error(section.key_src, *section.node,
                         "missing required option '" + option.name + "' for " + kind_name +
                             " plugin '" + plugin->name + "'",
                         hint);
    values[option.name] = *option.default_value;
  }
  std::vector<std::string> omits;
  for (const auto& option : plugin->schema.specs())
    if (option.added_later && option.default_value && values.at(option.name) == *option.default_value)
      omits.push_back(option.name);
  PluginChoice choice{plugin->name, Options(std::move(values)), check_.at(*pending.name_node),
                      std::move(where), std::move(omits)};
  choice.content_sha256 = std::move(content);
  return choice;
}

PluginChoice ParsedExperiment::default_comm_hook(const Section& distributed,
                                                const PluginCatalog& catalog) const {
  const PluginDescriptor* plugin = catalog.find(PluginKind::comm_hook, kDefaultCommHook);
  if (plugin == nullptr)
    throw check_.error(distributed.key_src, *distributed.node,
                       std::string("[distributed] without [comm_hook] uses the comm_hook plugin '") +
                           kDefaultCommHook + "', which is not loaded",
                       "add [comm_hook] plugin = \"...\" naming a loaded hook, or load runner's "
                       "built-in plugins; run 'runner plugins' to see what is loaded");
  std::map<std::string, OptionValue> values;
  for (const auto& option : plugin->schema.specs()) {
    if (!option.default_value)
      throw check_.error(distributed.key_src, *distributed.node,
                         std::string("the default comm_hook plugin '") + kDefaultCommHook +
                             "' has a required option '" + option.name + "'",
                         "add [comm_hook] with its options");
    values[option.name] = *option.default_value;
  }
  return PluginChoice{plugin->name, Options(std::move(values)), check_.at(*distributed.node), {}, {}};
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

// ---------------------------------------------------------------------------

std::shared_ptr<const ParsedExperiment> parse_experiment_file(
    const fs::path& path, const std::vector<std::string>& set_overrides) {
  return std::make_shared<const ParsedExperiment>(path, set_overrides);
}

std::vector<fs::path> plugin_paths_of(const ParsedExperiment& parsed) {
  return parsed.plugin_paths();
}

std::int64_t trial_count(const ParsedExperiment& parsed) { return parsed.trial_count(); }

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
