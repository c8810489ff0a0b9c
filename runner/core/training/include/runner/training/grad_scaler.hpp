// Dynamic loss scaling for float16 training (precision = "amp_fp16"), with
// torch.amp.GradScaler's semantics, on the same ATen kernels
// (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_).
//
// One optimizer step:
//
//   scaler.scale(loss).backward();
//   scaler.unscale(parameters);            // optional: before clipping
//   clip_grad_norm(parameters, max_norm);  // on true gradients
//   const bool stepped = scaler.step(optimizer);  // unscales if not yet; skips on inf/nan
//   scaler.update();                       // backs off or grows the scale
//
// The scale and the found-inf flags live on the device, as PyTorch keeps
// them: scale(), unscale() and update() never wait for the device.
// step(), found_inf() and current_scale() read a value on the host (one
// synchronisation on a GPU, as GradScaler.step's .item() is).
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runner::training {

/// GradScaler's constructor arguments, with its defaults.
struct GradScalerOptions {
  /// The scale before the first step (2^16).
  double init_scale = 65536.0;
  /// Multiplies the scale after growth_interval steps in a row without inf/nan (> 1).
  double growth_factor = 2.0;
  /// Multiplies the scale after a step with inf/nan gradients, in (0, 1).
  double backoff_factor = 0.5;
  /// Steps in a row without inf/nan before the scale grows (>= 1).
  std::int64_t growth_interval = 2000;
};

/// Why `options` cannot scale (a message without location), or std::nullopt.
[[nodiscard]] std::optional<std::string> grad_scaler_error(const GradScalerOptions& options);

class GradScaler {
 public:
  /// Throws runner::Error with grad_scaler_error's message when it has one.
  explicit GradScaler(GradScalerOptions options = {});

  /// loss * scale. The first call places the scale (float32) and the growth
  /// tracker (int32) on `loss`'s device.
  [[nodiscard]] torch::Tensor scale(const torch::Tensor& loss);

  /// Divides the gradients of `parameters` by the scale in place (by its
  /// float32 reciprocal, computed in float64 as PyTorch does) and records
  /// whether any is inf or nan. Parameters without a gradient are skipped.
  /// Throws std::logic_error before scale(), when called twice before
  /// update() or after step(), and runner::Error on float16 gradients
  /// (GradScaler refuses them: keep float32 weights under autocast).
  void unscale(const std::vector<torch::Tensor>& parameters);

  /// Unscales the gradients of every parameter group of `optimizer` (unless
  /// unscale() already did) and runs optimizer.step() unless a gradient was
  /// inf or nan. Returns whether it stepped. Reads found-inf on the host.
  bool step(torch::optim::Optimizer& optimizer);

  /// Whether the gradients unscaled since the last update() held an inf or
  /// nan. Reads the device's flags on the host. Throws std::logic_error
  /// before unscale().
  [[nodiscard]] bool found_inf() const;

  /// The sum of the found-inf flags of every device, as a float32 tensor on
  /// the scale's device (0 when all gradients were finite), without reading it.
  [[nodiscard]] torch::Tensor found_inf_tensor() const;

  /// Backs the scale off (after inf/nan) or counts the clean step and grows
  /// it every growth_interval clean steps in a row, on the device; then a
  /// new iteration may unscale again. Throws std::logic_error when no
  /// gradients were unscaled since the last update().
  void update();

  /// The current scale (init_scale before the first scale()). Reads it on the host.
  [[nodiscard]] double current_scale() const;

  /// The scale tensor (0-dim float32), undefined before the first scale().
  [[nodiscard]] const torch::Tensor& scale_tensor() const { return scale_; }

  /// Clean steps in a row counted toward the next growth. Reads it on the host.
  [[nodiscard]] std::int64_t growth_tracker() const;

  [[nodiscard]] const GradScalerOptions& options() const { return options_; }

 private:
  enum class Stage { ready, unscaled, stepped };

  GradScalerOptions options_;
  torch::Tensor scale_;           // float32, 0-dim, on the first loss's device
  torch::Tensor growth_tracker_;  // int32, 0-dim, beside scale_
  // One flag per device gradients were found on, in the order they came.
  std::vector<std::pair<c10::Device, torch::Tensor>> found_inf_;
  Stage stage_ = Stage::ready;
};

}  // namespace runner::training
