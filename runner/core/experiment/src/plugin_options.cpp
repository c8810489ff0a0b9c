// A plugin's table resolved against its declared options: unknown keys,
// types, defaults, paths, content hashes, and the plugin's rules over its
// options taken together (see plugin_options.hpp).
#include "plugin_options.hpp"

#include <toml++/toml.h>

#include <exception>
#include <map>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "parsed_experiment.hpp"

namespace runner::experiment::detail {

std::string describe_hint(const std::string& plugin) {
  return "run 'runner plugins describe " + plugin + "' to see its options";
}

void check_option_rules(const PluginDescriptor& plugin, const PluginChoice& choice,
                        const std::string& section) {
  const std::string kind = to_string(plugin.kind);
  const std::string hint = describe_hint(plugin.name);
  for (const OptionCheck& check : plugin.schema.checks()) {
    try {
      check(choice.options);
    } catch (const OptionError& e) {
      throw Error(choice.where_of(e.option()),
                  "'" + section + "." + e.option() + "' of " + kind + " plugin '" + plugin.name +
                      "': " + e.what(),
                  hint);
    } catch (const std::exception& e) {
      // A check should name the option; one that does not still refuses the trial.
      throw Error(choice.where, kind + " plugin '" + plugin.name + "' refuses these options: " +
                                    e.what(),
                  hint);
    }
  }
}

}  // namespace runner::experiment::detail

namespace runner {

using experiment::detail::describe_hint;
using experiment::detail::find_key;
using experiment::detail::Leaf;
using experiment::detail::Section;
using experiment::detail::SectionSpec;

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
  experiment::detail::check_option_rules(*plugin, choice, spec.name);
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

}  // namespace runner
