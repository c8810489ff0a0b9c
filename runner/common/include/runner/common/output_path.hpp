// The output-path rule, one for every file runner writes at a user's request
// (--out of export and report, merge --into, train.save_to, profiler traces,
// rerun files; docs/cli.md "Output files"): a new path or an existing regular
// file is written whole through a temporary file renamed into place (files.hpp);
// "-" and /dev/stdout mean standard output; anything else already there (a
// device, a FIFO, a socket, a directory, a symbolic link) is refused with exit
// 2 and left exactly as it was, because renaming over it would replace it.
#pragma once

#include <filesystem>
#include <string>

#include "runner/common/error.hpp"

namespace runner {

/// Where an output named by the user goes.
enum class OutputTarget { standard_output, file };

/// How a command names one of its outputs, for check_output() and its messages.
struct OutputUse {
  std::string option;               ///< how the user named it: "--out", "--into", "train.save_to"
  std::string example = "out.csv";  ///< a file name for the hints ("report.html", "all.db")
  std::string what = "the output";  ///< what is written, for a refused standard output ("weights")
  bool standard_output = true;      ///< whether standard output ("-", /dev/stdout) may take it
  bool probe_folder = true;         ///< whether its folder must take new files now (see files.hpp)
  SourceLocation where;             ///< the experiment file's key that named it, if any
};

/// Whether `path` names this process's standard output, by its name alone:
/// "-", /dev/stdout, /dev/fd/1, /proc/self/fd/1 or /proc/<this pid>/fd/1.
[[nodiscard]] bool names_standard_output(const std::filesystem::path& path);

/// What stands at `path` that runner must not replace, not following a
/// symbolic link: "a character device", "a block device", "a FIFO", "a
/// socket", "a directory", "a symbolic link"; empty when nothing is there or a
/// regular file is.
[[nodiscard]] std::string non_regular_kind(const std::filesystem::path& path);

/// Throws runner::Error (input: exit 2), at `use.where` when known, when
/// something other than a regular file stands at `path`; the hint names
/// `use.option`. Touches nothing.
void refuse_non_regular(const std::filesystem::path& path, const OutputUse& use);

/// The whole rule, for a command to call before any other work: standard
/// output for a name of it (refused unless `use.standard_output`), else
/// refuse_non_regular() and, with `use.probe_folder`, check_output_path().
[[nodiscard]] OutputTarget check_output(const std::filesystem::path& path, const OutputUse& use);

}  // namespace runner
