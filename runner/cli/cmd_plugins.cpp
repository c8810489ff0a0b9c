// runner plugins / runner plugins describe NAME
#include <iostream>

#include "commands.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/host/host.hpp"

namespace runner::cli {
namespace {

std::string constraints_of(const OptionSpec& spec) {
  std::vector<std::string> parts;
  // Bounds of integer options are integers: "1..1048576", not "1.0..1048576.0".
  const bool integral =
      spec.type == OptionType::integer || spec.type == OptionType::integer_list;
  auto number = [integral](double v) {
    return integral ? std::to_string(static_cast<std::int64_t>(v)) : to_string(OptionValue{v});
  };
  if (spec.min && spec.max) parts.push_back(number(*spec.min) + ".." + number(*spec.max));
  else if (spec.min) parts.push_back(">= " + number(*spec.min));
  else if (spec.max) parts.push_back("<= " + number(*spec.max));
  if (!spec.choices.empty()) parts.push_back(join(spec.choices, "|"));
  if (!spec.integer_choices.empty()) {
    std::vector<std::string> allowed;
    for (const std::int64_t choice : spec.integer_choices) allowed.push_back(std::to_string(choice));
    parts.push_back(join(allowed, "|"));
  }
  if (spec.max_items && *spec.max_items == spec.min_items)
    parts.push_back(std::to_string(spec.min_items) + " items");
  else if (spec.max_items)
    parts.push_back(std::to_string(spec.min_items) + ".." + std::to_string(*spec.max_items) +
                    " items");
  else if (spec.min_items > 0)
    parts.push_back(">= " + std::to_string(spec.min_items) + " items");
  return parts.empty() ? "-" : join(parts, ", ");
}

int handle_list(const Args&, const Global& global) {
  PluginHost host;
  load_plugins(host, {}, global);
  Table table({"kind", "name", "version", "library", "description"});
  for (const PluginDescriptor* d : host.all()) {
    const LoadedLibrary& lib = host.library_of(d->kind, d->name);
    table.add({to_string(d->kind), d->name, lib.plugin_version,
               lib.path.filename().string(), d->help});
  }
  if (table.empty()) {
    std::cout << "no plugins loaded; set RUNNER_PLUGIN_PATH or pass --plugin-path\n";
    return kExitOk;
  }
  table.print(std::cout);
  std::cout << "\n" << host.libraries().size() << " librar"
            << (host.libraries().size() == 1 ? "y" : "ies")
            << " loaded; 'runner plugins describe NAME' shows a plugin's options\n";
  return kExitOk;
}

int handle_describe(const Args& args, const Global& global) {
  PluginHost host;
  load_plugins(host, {}, global);
  const std::string& name = args.positionals[0];
  std::vector<const PluginDescriptor*> found;
  std::vector<std::string> all_names;
  for (const PluginDescriptor* d : host.all()) {
    all_names.push_back(d->name);
    if (d->name == name) found.push_back(d);
  }
  if (found.empty()) {
    std::string message = "unknown plugin '" + name + "'";
    if (auto close = closest_match(name, all_names)) message += "; did you mean '" + *close + "'?";
    throw Error(message, "run 'runner plugins' to see what is loaded");
  }
  for (const PluginDescriptor* d : found) {
    const LoadedLibrary& lib = host.library_of(d->kind, d->name);
    std::cout << d->name << " (" << to_string(d->kind) << " plugin)\n"
              << "  " << d->help << "\n"
              << "  library: " << lib.path.string() << "\n"
              << "  version: " << lib.plugin_version << "\n"
              << "  sha256:  " << lib.sha256 << "\n\n";
    if (d->schema.specs().empty()) {
      std::cout << "no options\n";
      continue;
    }
    Table table({"option", "type", "default", "allowed", "description"});
    for (const OptionSpec& spec : d->schema.specs())
      table.add({spec.name, short_name(spec.type),
                 spec.default_value ? to_string(*spec.default_value) : "(required)",
                 constraints_of(spec), spec.doc});
    table.print(std::cout);
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace

Command plugins_command() {
  CommandDef def;
  def.name = "plugins";
  def.summary = "list the plugins that load (built-in, RUNNER_PLUGIN_PATH, --plugin-path)";
  def.usage = "runner plugins [options]";
  return {def, &handle_list};
}

Command plugins_describe_command() {
  CommandDef def;
  def.name = "plugins describe";
  def.summary = "show a plugin's library, version and declared options";
  def.usage = "runner plugins describe NAME [options]";
  def.positionals = {"NAME"};
  return {def, &handle_describe};
}

}  // namespace runner::cli
