// Which ATen kernels the device of a run has. An optimizer's impl = "fused"
// calls one operator (aten::_fused_adamw_, ...) that ATen implements for some
// backends only; asking the dispatcher in the factory, from
// OptimizerContext::device, turns a missing kernel into an option error before
// the run starts instead of a dispatcher error at the first step.
//
// Header only: every optimizer plugin that offers a fused impl includes it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>

#include <string>

#include <runner/options.hpp>

namespace runner_optimizers {

/// True when the dispatcher holds a kernel of operator `op` (its overload
/// `overload`, "" for the default one) that serves float32 tensors on
/// `device`: one registered for the device's backend, or a composite one that
/// serves every backend. False for an operator this LibTorch does not know.
inline bool has_kernel(const char* op, const char* overload, c10::DeviceType device) {
  const auto handle = c10::Dispatcher::singleton().findSchema({op, overload});
  if (!handle) return false;
  c10::DispatchKey key = c10::DispatchKey::Undefined;
  try {
    key = c10::computeDispatchKey(c10::kFloat, c10::kStrided, c10::Device(device));
  } catch (const c10::Error&) {
    return false;  // a device type ATen has no dense backend for
  }
  return handle->hasKernelForDispatchKey(key) ||
         handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
         handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

/// The refusal of impl = "fused" where `op` has no kernel for `device`.
inline runner::OptionError missing_fused_kernel(const std::string& op, const c10::Device& device) {
  return runner::OptionError(
      "impl", "impl = \"fused\" needs a kernel of " + op + " for device '" + device.str() +
                  "', and this LibTorch has none; use impl = \"foreach\" (or \"loop\")");
}

/// Throws missing_fused_kernel unless `device` has a kernel of `op` (default overload).
inline void require_fused_kernel(const std::string& op, const c10::Device& device) {
  if (!has_kernel(op.c_str(), "", device.type())) throw missing_fused_kernel(op, device);
}

}  // namespace runner_optimizers
