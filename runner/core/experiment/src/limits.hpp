// Bounds on what an experiment may make runner read and build, checked before
// the work they bound (internal to the experiment layer; documented in
// docs/experiment.md#limits). Every bound is refused as bad input (exit 2)
// with a position, never reached as a crash or an exhausted machine.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace runner::experiment::detail {

/// Largest experiment file (the root or one it extends), bytes.
inline constexpr std::size_t kMaxFileBytes = 8 * 1024 * 1024;
/// Largest total of every file read for one experiment, bytes.
inline constexpr std::size_t kMaxTotalBytes = 32 * 1024 * 1024;
/// Longest chain of `extends` (the root is depth 0).
inline constexpr std::size_t kMaxExtendsDepth = 32;
/// Most file reads for one experiment, counting a file each time a path of
/// `extends` reaches it (so that diamonds cannot grow exponentially).
inline constexpr std::size_t kMaxFileReads = 256;
/// Most items of any list option, whatever its plugin declares.
inline constexpr std::size_t kMaxListItems = 65536;
/// Deepest nesting of a TOML document: dotted key parts plus enclosing arrays
/// and inline tables. toml++ recurses once per level (tens of thousands
/// overflow the stack); real experiments need a handful.
inline constexpr std::size_t kMaxNesting = 64;

/// Why a file could not be read.
struct ReadFailure {
  std::string reason;  ///< "No such file or directory", "not a regular file (a FIFO)", ...
  std::string hint;    ///< what to do, when there is more to say than the default
};

/// Reads a whole experiment file into `text`, refusing anything but a regular
/// file (a FIFO would block, /dev/zero never ends) and any file over
/// kMaxFileBytes (also one that grows while it is read). Returns the failure,
/// or nothing on success.
[[nodiscard]] std::optional<ReadFailure> read_experiment_file(const std::filesystem::path& path,
                                                              std::string& text);

/// A position in a text, 1-based.
struct TextPosition {
  int line = 1;
  int column = 1;
};

/// What a scan of the raw text refuses before the parser sees it.
struct TextProblem {
  TextPosition where;
  std::string message;
  std::string hint;
};

/// The first place where `text` (TOML) would lead toml++ past its limits:
/// nesting deeper than kMaxNesting (the parser recurses once per level), or
/// a non-ASCII character outside strings and comments (never valid TOML 1.0;
/// toml++ 3.3's check of such a character for Unicode whitespace reaches an
/// unreachable branch, undefined behaviour, for most code points). A lexical
/// scan, linear in the text, that skips strings and comments and never
/// under-counts what the parser will build.
[[nodiscard]] std::optional<TextProblem> find_text_problem(std::string_view text);

}  // namespace runner::experiment::detail
