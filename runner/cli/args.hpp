// Command-line parsing for the subcommands: declared options, `--help` text
// generated from the declarations, usage errors that exit 2.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace runner::cli {

/// One option of a subcommand.
struct OptionDef {
  std::string name;          ///< "--db"
  std::string metavar;       ///< "PATH"; empty for a flag
  std::string help;          ///< one line
  bool repeatable = false;   ///< may be given several times
};

/// A subcommand's interface.
struct CommandDef {
  std::string name;                      ///< "run", "plugins describe"
  std::string summary;                   ///< one line for `runner --help`
  std::string usage;                     ///< "runner run FILE [options]"
  std::vector<std::string> positionals;  ///< names of required positionals
  bool variadic = false;                 ///< the last positional takes one or more values
  std::vector<OptionDef> options;        ///< command-specific options (common ones are added)
  std::string details;                   ///< extra paragraphs for --help
};

/// Parsed arguments.
struct Args {
  std::vector<std::string> positionals;
  std::map<std::string, std::vector<std::string>> values;  ///< option -> values given
  bool has(const std::string& option) const { return values.count(option) != 0; }
  /// The last value of an option, or `fallback`.
  std::string get(const std::string& option, const std::string& fallback = {}) const;
};

/// Options every subcommand takes (--db, --plugin-path, --log-level, --help).
[[nodiscard]] const std::vector<OptionDef>& common_options();

/// Parses `argv` for `command`; throws runner::Error (input) naming the
/// problem, with a "did you mean" for a mistyped option.
[[nodiscard]] Args parse(const CommandDef& command, const std::vector<std::string>& argv);

/// The --help text of a command.
[[nodiscard]] std::string help_text(const CommandDef& command);

/// `text` as an integer >= `min`; otherwise runner::Error (input):
/// "WHAT must be a positive integer, found 'x'" (min 1) or "... a non-negative integer ..." (min 0).
[[nodiscard]] std::int64_t parse_integer(const std::string& text, const std::string& what,
                                         std::int64_t min);

/// Settings shared by all subcommands, from options and the environment.
struct Global {
  std::filesystem::path db;                        ///< --db, RUNNER_DB, or ./runner.db
  std::vector<std::filesystem::path> plugin_paths; ///< --plugin-path values
  bool allow_unsafe_plugins = false;               ///< --allow-unsafe-plugins
  std::chrono::steady_clock::time_point start;     ///< process start
};

/// Reads the common options (and RUNNER_DB); configures logging.
[[nodiscard]] Global global_settings(const Args& args, std::chrono::steady_clock::time_point start);

}  // namespace runner::cli
