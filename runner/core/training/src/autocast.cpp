// Autocast for a scope, as torch.autocast does (autocast.hpp).
#include "runner/training/autocast.hpp"

#include <ATen/autocast_mode.h>

#include <string>

#include "runner/common/error.hpp"

namespace runner::training {

AutocastGuard::AutocastGuard(c10::DeviceType device, c10::ScalarType dtype) : device_(device) {
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA)
    throw Error("autocast runs on cpu or cuda, not " + c10::DeviceTypeName(device, true));
  if (dtype != c10::ScalarType::BFloat16 && dtype != c10::ScalarType::Half)
    throw Error(std::string("autocast lowers to bfloat16 or float16, not ") + c10::toString(dtype));
  previous_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  previous_enabled_ = at::autocast::is_autocast_enabled(device);
  previous_dtype_ = at::autocast::get_autocast_dtype(device);
  at::autocast::set_autocast_enabled(device, true);
  at::autocast::set_autocast_dtype(device, dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(true);
}

AutocastGuard::~AutocastGuard() {
  // The cache holds low-precision copies of the weights for the region: it
  // must not outlive the outermost region, or later updates would be missed.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

}  // namespace runner::training
