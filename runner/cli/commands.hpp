// The subcommands: each has a definition (for parsing and --help) and a handler.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "args.hpp"

namespace runner {
class PluginHost;
}

namespace runner::cli {

/// A subcommand: definition plus handler returning the exit code.
struct Command {
  CommandDef def;
  int (*handler)(const Args& args, const Global& global);
};

Command run_command();
Command validate_command();
Command plugins_command();
Command plugins_describe_command();
Command runs_command();
Command show_command();
Command merge_command();
Command rerun_command();
Command compare_command();
Command check_command();
Command report_command();
Command export_command();
Command history_command();
Command submit_command();
Command submit_slurm_command();

/// Loads built-in, RUNNER_PLUGIN_PATH, `extra` (experiment) and --plugin-path plugins.
void load_plugins(PluginHost& host, const std::vector<std::filesystem::path>& experiment_paths,
                  const Global& global);

}  // namespace runner::cli
