// An enum from and to its name, for the small enums whose text appears in
// files and on the command line (RunKind, store::RunStatus): each declares
// its values in an array and a constexpr to_string, and parses with
// parse_enum, so every such parser accepts and refuses the same way.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <vector>

namespace runner {

/// Throws runner::Error "unknown WHAT 'TEXT' (expected a, b or c)".
[[noreturn]] void throw_unknown_name(std::string_view what, std::string_view text,
                                     const std::vector<std::string_view>& names);

/// The value of `all` whose to_string() is `text`; otherwise throws
/// runner::Error "unknown WHAT 'TEXT' (expected ...)" listing every name.
template <typename Enum, std::size_t N>
[[nodiscard]] Enum parse_enum(std::string_view text, const std::array<Enum, N>& all,
                              std::string_view what) {
  for (const Enum value : all)
    if (text == to_string(value)) return value;
  std::vector<std::string_view> names;
  for (const Enum value : all) names.emplace_back(to_string(value));
  throw_unknown_name(what, text, names);
}

}  // namespace runner
