// The commands the project tells its users to run: the shell lines of
// README.md's ```sh blocks and the command lines of each shipped
// experiment's header comment, read from the files at test time so that a
// command added to either is checked without touching a test.
//
//   for (const auto& c : runner::test::header_commands(file)) ...   // "#   runner compare ..."
//   if (auto cmp = runner::test::parse_compare(c.text)) ...          // its --by, --where, ...
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace runner::test {

/// One command as printed: continuation lines joined, a trailing "# comment" removed.
struct ShippedCommand {
  std::string text;             ///< "runner compare experiment:amp --by train.precision ..."
  std::filesystem::path file;   ///< the file that prints it
  int line = 0;                 ///< 1-based line of its first line
};

/// The commands of the leading comment block of an experiment file: comment
/// lines indented by at least two spaces that start with a program a user
/// runs (runner, runner-export, torchrun, python or a path ending in one).
std::vector<ShippedCommand> header_commands(const std::filesystem::path& toml);

/// The header's prose: the leading comment block's lines without their "#".
std::vector<std::string> header_lines(const std::filesystem::path& toml);

/// The commands of a Markdown file's ```sh blocks, in order.
std::vector<ShippedCommand> readme_commands(const std::filesystem::path& markdown);

/// The words of a command line as a POSIX shell splits them (quotes removed).
std::vector<std::string> shell_words(const std::string& command);

/// A `runner compare` line's selectors and side options.
struct CompareCommand {
  std::vector<std::string> selectors;  ///< "experiment:amp", "trial:1", ...
  std::string by;                      ///< --by, empty without
  std::string baseline;                ///< --baseline
  std::string versus;                  ///< --versus
  std::vector<std::pair<std::string, std::string>> where;  ///< --where KEY=VALUE, in order
  bool pairs = false;                  ///< --pairs: one comparison per pair of like trials
};

/// The parts of a `runner compare ...` command; nullopt for any other command.
std::optional<CompareCommand> parse_compare(const std::string& command);

}  // namespace runner::test
