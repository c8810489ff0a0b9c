// Precision modes of a run ([train] precision, [infer] precision): what the
// weights and activations are stored in, and whether autocast picks a lower
// precision per operator.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <string_view>

namespace runner::training {

enum class Precision {
  fp32,      ///< everything float32
  bf16,      ///< weights, activations and gradients in bfloat16 (module and inputs cast)
  amp_bf16,  ///< float32 weights; autocast runs eligible operators in bfloat16
  amp_fp16,  ///< float32 weights; autocast in float16, with dynamic loss scaling
};

/// "amp_bf16" -> Precision::amp_bf16; std::nullopt for anything else.
[[nodiscard]] std::optional<Precision> parse_precision(std::string_view name);

/// The experiment file's spelling.
[[nodiscard]] const char* to_string(Precision precision);

/// The dtype autocast lowers to (amp_*), or std::nullopt.
[[nodiscard]] std::optional<c10::ScalarType> autocast_dtype(Precision precision);

/// The dtype of the weights and floating inputs: bfloat16 for bf16, else float32.
[[nodiscard]] c10::ScalarType storage_dtype(Precision precision);

/// True for amp_fp16: gradients are scaled, unscaled and checked every step.
[[nodiscard]] bool needs_loss_scaling(Precision precision);

}  // namespace runner::training
