// runner: a declarative experiment runner for LibTorch performance work.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/scheduler/scheduler.hpp"
#include "runner/version.hpp"

namespace {

using runner::cli::Command;

std::vector<Command> all_commands() {
  return {runner::cli::run_command(),     runner::cli::validate_command(),
          runner::cli::plugins_command(), runner::cli::plugins_describe_command(),
          runner::cli::runs_command(),    runner::cli::show_command(),
          runner::cli::merge_command(),   runner::cli::rerun_command(),
          runner::cli::compare_command(),  runner::cli::check_command(),  runner::cli::history_command(),
          runner::cli::report_command(),
          runner::cli::export_command(),  runner::cli::submit_command(),
          runner::cli::submit_slurm_command()};
}

void print_main_help(const std::vector<Command>& commands) {
  std::cout << "usage: runner <command> [options]\n\n"
               "Runs LibTorch experiments described in TOML, measures them, and records\n"
               "every number with an environment fingerprint in SQLite.\n\ncommands:\n";
  for (const auto& c : commands) {
    std::string name = "  " + c.def.name;
    name.resize(std::max<std::size_t>(name.size() + 2, 22), ' ');
    std::cout << name << c.def.summary << "\n";
  }
  std::cout << "\nrun 'runner <command> --help' for a command's options; "
               "'runner --version' for the version.\n";
}

int dispatch(int argc, char** argv, std::chrono::steady_clock::time_point start) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto commands = all_commands();
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_main_help(commands);
    return args.empty() ? runner::kExitBadInput : runner::kExitOk;
  }
  // Not a user command: a run process started by exec because its
  // environment differs from the runner's (runner_scheduler starts it).
  if (args[0] == "__run-fresh" && args.size() == 4) {
    const auto fd = [&](const std::string& text) {
      const auto value = runner::parse_int64(text);
      return value ? static_cast<int>(*value) : -1;
    };
    const int code = runner::serve_fresh_run(fd(args[1]), fd(args[2]), fd(args[3]));
    // As a forked run process does: no static destructors of LibTorch or the
    // plugins (nor a leak check of them in a sanitizer build) after the run.
    std::fflush(nullptr);
    ::_exit(code);
  }
  if (args[0] == "--version") {
    std::cout << "runner " << RUNNER_VERSION_STRING << "\n";
    return runner::kExitOk;
  }
  // Two-word commands ("plugins describe") take precedence over one-word ones.
  const Command* chosen = nullptr;
  std::size_t consumed = 0;
  for (const auto& c : commands) {
    const auto words = runner::split(c.def.name, ' ');
    if (words.size() > args.size()) continue;
    bool match = true;
    for (std::size_t i = 0; i < words.size(); ++i) match = match && words[i] == args[i];
    if (match && words.size() > consumed) {
      chosen = &c;
      consumed = words.size();
    }
  }
  if (chosen == nullptr) {
    std::vector<std::string> names;
    for (const auto& c : commands) names.push_back(runner::split(c.def.name, ' ')[0]);
    std::string message = "unknown command '" + args[0] + "'";
    if (auto close = runner::closest_match(args[0], names))
      message += "; did you mean '" + *close + "'?";
    throw runner::Error(message, "run 'runner --help' to see the commands");
  }
  const std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(consumed),
                                      args.end());
  const runner::cli::Args parsed = runner::cli::parse(chosen->def, rest);
  if (parsed.has("--help")) {
    std::cout << runner::cli::help_text(chosen->def);
    return runner::kExitOk;
  }
  const runner::cli::Global global = runner::cli::global_settings(parsed, start);
  return chosen->handler(parsed, global);
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  auto logger = spdlog::stderr_color_mt("runner");
  logger->set_pattern("%^%l%$ %v");
  spdlog::set_default_logger(logger);
  try {
    return dispatch(argc, argv, start);
  } catch (const runner::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    if (!e.hint().empty()) std::cerr << "hint: " << e.hint() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    // Not a runner::Error, so not escaped yet: it may quote a file's bytes.
    std::cerr << "error: internal: " << runner::terminal_safe_lines(e.what()) << "\n";
    return runner::kExitRunFailed;
  }
}
