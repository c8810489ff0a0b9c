// Small string helpers shared by the experiment layer, the plugin host and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace runner {

/// Edit distance counting insertions, deletions, substitutions and swaps of
/// two adjacent characters as one edit each (optimal string alignment).
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word`, if it is close enough to be a plausible
/// typo (distance <= max(1, len/3)); used for "did you mean" hints.
[[nodiscard]] std::optional<std::string> closest_match(
    std::string_view word, const std::vector<std::string>& candidates);

/// Joins with a separator: join({"a","b"}, ", ") == "a, b".
[[nodiscard]] std::string join(const std::vector<std::string>& parts, std::string_view sep);

/// A tensor shape (or any integers) as messages show it: "[10, 512]", "[]".
[[nodiscard]] std::string shape_text(std::span<const std::int64_t> shape);

/// Every occurrence of `from` (not empty) replaced by `to`, left to right;
/// replacements are not searched again.
[[nodiscard]] std::string replace_all(std::string_view text, std::string_view from,
                                      std::string_view to);

/// Splits on a single character; empty fields are kept.
[[nodiscard]] std::vector<std::string> split(std::string_view text, char sep);

/// True if `text` holds a C0 control character (NUL, ESC, \r, \b, ...),
/// DEL, or a C1 control character (U+0080 to U+009F in UTF-8).
[[nodiscard]] bool has_control_character(std::string_view text);

/// `text` safe to print on a terminal: control characters (C0, DEL, C1 such
/// as ESC, \r, \b, NUL) and bytes that are not UTF-8 become visible escapes
/// (\e, \r, \x08, \u009b, ...); backslashes stay as they are, so escaping
/// twice changes nothing. Everything read from a store, a file or a user goes
/// through this before it reaches a terminal or an error message.
[[nodiscard]] std::string terminal_safe(std::string_view text);

/// terminal_safe() that keeps line breaks: for whole messages whose lines
/// runner wrote (every runner::Error's message and hint passes through it).
[[nodiscard]] std::string terminal_safe_lines(std::string_view text);

/// Removes leading and trailing whitespace.
[[nodiscard]] std::string trim(std::string_view text);

/// `text` as a base-10 integer when all of it is one: an optional '-' and
/// digits, as std::from_chars reads them (no whitespace, no '+'). nullopt
/// when it is empty, is not a number, has anything after it, or overflows.
[[nodiscard]] std::optional<std::int64_t> parse_int64(std::string_view text);

/// `text` as a floating-point number when all of it is one (std::from_chars:
/// "1.5", "-2e-3", "inf", "nan"; no whitespace, no '+', no hexadecimal).
/// nullopt when it is empty, is not a number, has anything after it, or is
/// out of the range of double.
[[nodiscard]] std::optional<double> parse_double(std::string_view text);

/// A duration for people, rounded to the second: "45s", "2m5s", "3h7m"
/// (seconds dropped from an hour on); "?" when negative or not finite.
[[nodiscard]] std::string format_duration(double seconds);

}  // namespace runner
