#include "args.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <optional>
#include <sstream>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"

namespace runner::cli {

std::string Args::get(const std::string& option, const std::string& fallback) const {
  auto it = values.find(option);
  return it == values.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<OptionDef>& common_options() {
  static const std::vector<OptionDef> options = {
      {"--db", "PATH", "results database (default: $RUNNER_DB, else ./runner.db)", false},
      {"--plugin-path", "PATH", "also load plugins from this library or folder", true},
      {"--allow-unsafe-plugins", "",
       "load plugin libraries other users could have written (world-writable, foreign-owned)",
       false},
      {"--log-level", "LEVEL", "trace, debug, info, warn, error or off (default: info)", false},
      {"--help", "", "show this help", false},
  };
  return options;
}

namespace {

const OptionDef* find_option(const CommandDef& command, const std::string& name) {
  for (const auto& o : command.options)
    if (o.name == name) return &o;
  for (const auto& o : common_options())
    if (o.name == name) return &o;
  return nullptr;
}

std::vector<std::string> all_option_names(const CommandDef& command) {
  std::vector<std::string> names;
  for (const auto& o : command.options) names.push_back(o.name);
  for (const auto& o : common_options()) names.push_back(o.name);
  return names;
}

}  // namespace

Args parse(const CommandDef& command, const std::vector<std::string>& argv) {
  Args args;
  const std::string help_hint = "run '" + command.usage.substr(0, command.usage.find(" [")) +
                                "' with --help for usage";
  const std::string prefix = "runner " + command.name + ": ";
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg.size() > 2 && arg.rfind("--", 0) == 0) {
      std::string value;
      bool inline_value = false;
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inline_value = true;
      }
      const OptionDef* def = find_option(command, arg);
      if (def == nullptr) {
        std::string message = prefix + "unknown option '" + arg + "'";
        if (auto close = closest_match(arg, all_option_names(command)))
          message += "; did you mean '" + *close + "'?";
        throw Error(message, "run 'runner " + command.name + " --help' for usage");
      }
      if (def->metavar.empty()) {
        if (inline_value)
          throw Error(prefix + "option '" + arg + "' takes no value",
                      "run 'runner " + command.name + " --help' for usage");
      } else if (!inline_value) {
        if (i + 1 >= argv.size())
          throw Error(prefix + "option '" + arg + "' needs a value (" + def->metavar + ")",
                      "run 'runner " + command.name + " --help' for usage");
        value = argv[++i];
      }
      auto& slot = args.values[arg];
      if (!slot.empty() && !def->repeatable && !def->metavar.empty())
        throw Error(prefix + "option '" + arg + "' given twice",
                    "run 'runner " + command.name + " --help' for usage");
      slot.push_back(value);
    } else {
      args.positionals.push_back(arg);
    }
  }
  if (args.has("--help")) return args;
  if (args.positionals.size() < command.positionals.size())
    throw Error(prefix + "missing " + command.positionals[args.positionals.size()],
                "usage: " + command.usage);
  if (!command.variadic && args.positionals.size() > command.positionals.size())
    throw Error(prefix + "unexpected argument '" + args.positionals[command.positionals.size()] +
                    "'",
                "usage: " + command.usage);
  (void)help_hint;
  return args;
}

std::string help_text(const CommandDef& command) {
  std::ostringstream out;
  out << "usage: " << command.usage << "\n\n" << command.summary << "\n";
  if (!command.details.empty()) out << "\n" << command.details << "\n";
  auto print = [&](const std::vector<OptionDef>& options) {
    for (const auto& o : options) {
      std::string left = "  " + o.name + (o.metavar.empty() ? "" : " " + o.metavar);
      if (left.size() < 26) left.resize(26, ' ');
      else left += "  ";
      out << left << o.help << (o.repeatable ? " (repeatable)" : "") << "\n";
    }
  };
  if (!command.options.empty()) {
    out << "\noptions:\n";
    print(command.options);
  }
  out << "\ncommon options:\n";
  print(common_options());
  return out.str();
}

std::int64_t parse_integer(const std::string& text, const std::string& what, std::int64_t min) {
  const std::optional<std::int64_t> value = parse_int64(text);
  if (!value || *value < min)
    throw Error(what + " must be a " + (min >= 1 ? "positive" : "non-negative") +
                " integer, found '" + text + "'");
  return *value;
}

Global global_settings(const Args& args, std::chrono::steady_clock::time_point start) {
  Global g;
  g.start = start;
  if (args.has("--db")) {
    g.db = args.get("--db");
    // SQLite would take "" as a private temporary database: runs would be
    // recorded nowhere.
    if (g.db.empty())
      throw Error("--db must name a file, found an empty path",
                  "pass --db PATH, or leave --db out for ./runner.db (or RUNNER_DB)");
  } else if (const char* env = std::getenv("RUNNER_DB"); env != nullptr && *env != '\0') {
    g.db = env;
  } else {
    g.db = "runner.db";
  }
  if (auto it = args.values.find("--plugin-path"); it != args.values.end())
    for (const auto& p : it->second) g.plugin_paths.emplace_back(p);
  g.allow_unsafe_plugins = args.has("--allow-unsafe-plugins");
  const std::string level = args.get("--log-level", "info");
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off")
    throw Error("--log-level must be one of trace, debug, info, warn, error, off; found '" +
                level + "'");
  spdlog::set_level(parsed);
  return g;
}

}  // namespace runner::cli
