// Precision modes of a run (precision.hpp).
#include "runner/training/precision.hpp"

#include "runner/training/names.hpp"

namespace runner::training {
namespace {

constexpr EnumNames<Precision, 4> kNames{{{
    {Precision::fp32, "fp32"},
    {Precision::bf16, "bf16"},
    {Precision::amp_bf16, "amp_bf16"},
    {Precision::amp_fp16, "amp_fp16"},
}}};

}  // namespace

std::optional<Precision> parse_precision(std::string_view name) { return kNames.parse(name); }

const char* to_string(Precision precision) { return kNames.name(precision); }

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

}  // namespace runner::training
