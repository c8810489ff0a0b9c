// The spellings of a recipe enum in experiment files ("amp_bf16", "cosine"),
// one table per enum serving both directions.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runner::training {

template <typename Enum, std::size_t N>
class EnumNames {
 public:
  constexpr explicit EnumNames(std::array<std::pair<Enum, const char*>, N> entries)
      : entries_(entries) {}

  /// The value spelled `name`, or std::nullopt.
  [[nodiscard]] constexpr std::optional<Enum> parse(std::string_view name) const {
    for (const auto& [value, spelling] : entries_)
      if (name == spelling) return value;
    return std::nullopt;
  }
  /// The spelling of `value` ("?" for a value outside the table).
  [[nodiscard]] constexpr const char* name(Enum value) const {
    for (const auto& [v, spelling] : entries_)
      if (v == value) return spelling;
    return "?";
  }
  /// Every spelling, in table order.
  [[nodiscard]] std::vector<std::string> all() const {
    std::vector<std::string> out;
    for (const auto& [value, spelling] : entries_) out.emplace_back(spelling);
    return out;
  }

 private:
  std::array<std::pair<Enum, const char*>, N> entries_;
};

}  // namespace runner::training
