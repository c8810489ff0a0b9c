// Autocast for a scope (precision = "amp_bf16" | "amp_fp16"): what
// `with torch.autocast(device_type, dtype):` does on entry and exit, through
// ATen's autocast API, so that LibTorch runs each operator in the precision
// PyTorch's autocast policy gives it (matmuls and convolutions in the low
// precision, reductions and losses in float32).
//
//   {
//     AutocastGuard autocast(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
//     loss = model.loss(model.forward(batch), batch);
//   }
//   loss.backward();  // outside, as PyTorch recommends; backward follows the forward's dtypes
//
// The state is thread-local, as in PyTorch: a guard affects only the thread
// it was made on, and must be destroyed there.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace runner::training {

class AutocastGuard {
 public:
  /// Enables autocast on `device` (CPU or CUDA) in `dtype` (BFloat16 or Half)
  /// with the weight-cast cache on, and enters one nesting level. Throws
  /// runner::Error for any other device or dtype (PyTorch would warn and
  /// run without autocast instead).
  AutocastGuard(c10::DeviceType device, c10::ScalarType dtype);

  /// Restores the enabled flag, dtype and cache setting found on entry, and
  /// drops the weight-cast cache when leaving the outermost autocast region.
  ~AutocastGuard();

  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard(AutocastGuard&&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

 private:
  c10::DeviceType device_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

}  // namespace runner::training
