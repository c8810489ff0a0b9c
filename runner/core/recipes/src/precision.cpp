#include "runner/recipes/precision.hpp"

#include <array>

namespace runner::recipes {
namespace {

constexpr std::array<std::pair<Precision, const char*>, 4> kNames{{
    {Precision::fp32, "fp32"},
    {Precision::bf16, "bf16"},
    {Precision::amp_bf16, "amp_bf16"},
    {Precision::amp_fp16, "amp_fp16"},
}};

}  // namespace

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [precision, name] : kNames) out.emplace_back(name);
    return out;
  }();
  return names;
}

std::optional<Precision> parse_precision(std::string_view name) {
  for (const auto& [precision, spelling] : kNames)
    if (name == spelling) return precision;
  return std::nullopt;
}

const char* to_string(Precision precision) {
  for (const auto& [p, spelling] : kNames)
    if (p == precision) return spelling;
  return "?";
}

std::optional<c10::ScalarType> autocast_dtype(Precision precision) {
  switch (precision) {
    case Precision::amp_bf16: return c10::ScalarType::BFloat16;
    case Precision::amp_fp16: return c10::ScalarType::Half;
    case Precision::fp32:
    case Precision::bf16: break;
  }
  return std::nullopt;
}

c10::ScalarType storage_dtype(Precision precision) {
  return precision == Precision::bf16 ? c10::ScalarType::BFloat16 : c10::ScalarType::Float;
}

bool needs_loss_scaling(Precision precision) { return precision == Precision::amp_fp16; }

}  // namespace runner::recipes
