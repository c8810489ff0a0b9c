// Dynamic loss scaling for float16 training, as torch.amp.GradScaler does (grad_scaler.hpp).
#include "runner/training/grad_scaler.hpp"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <torch/utils.h>

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "runner/common/error.hpp"

namespace runner::training {
namespace {

std::string shortest(double x) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return {buffer, result.ptr};
}

// Gradients of one device, split by dtype: the unscale kernel takes one
// dtype at a time. Both levels keep the order they were met in.
struct DeviceGrads {
  c10::Device device;
  std::vector<std::pair<c10::ScalarType, std::vector<torch::Tensor>>> by_dtype;
};

void add(std::vector<DeviceGrads>& devices, const torch::Tensor& grad) {
  DeviceGrads* device = nullptr;
  for (DeviceGrads& d : devices)
    if (d.device == grad.device()) device = &d;
  if (device == nullptr) device = &devices.emplace_back(DeviceGrads{grad.device(), {}});
  for (auto& [dtype, grads] : device->by_dtype)
    if (dtype == grad.scalar_type()) {
      grads.push_back(grad);
      return;
    }
  device->by_dtype.emplace_back(grad.scalar_type(), std::vector<torch::Tensor>{grad});
}

}  // namespace

std::optional<std::string> grad_scaler_error(const GradScalerOptions& o) {
  if (!(o.init_scale > 0.0 && std::isfinite(o.init_scale)))
    return "the initial loss scale is " + shortest(o.init_scale) + "; it must be above 0";
  if (!(o.growth_factor > 1.0 && std::isfinite(o.growth_factor)))
    return "the loss scale's growth factor is " + shortest(o.growth_factor) +
           "; it must be above 1";
  if (!(o.backoff_factor > 0.0 && o.backoff_factor < 1.0))
    return "the loss scale's backoff factor is " + shortest(o.backoff_factor) +
           "; it must be in (0, 1)";
  if (o.growth_interval < 1)
    return "the loss scale's growth interval is " + std::to_string(o.growth_interval) +
           " steps; it must be at least 1";
  return std::nullopt;
}

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (auto error = grad_scaler_error(options_)) throw Error(*error);
}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) {
  if (!scale_.defined()) {
    const auto on = torch::TensorOptions().device(loss.device());
    scale_ = torch::full({}, options_.init_scale, on.dtype(torch::kFloat32));
    growth_tracker_ = torch::zeros({}, on.dtype(torch::kInt32));
  }
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

void GradScaler::unscale(const std::vector<torch::Tensor>& parameters) {
  if (!scale_.defined())
    throw std::logic_error("GradScaler::unscale: no loss was scaled yet; call scale() first");
  if (stage_ == Stage::unscaled)
    throw std::logic_error("GradScaler::unscale: already called since the last update()");
  if (stage_ == Stage::stepped)
    throw std::logic_error("GradScaler::unscale: called after step(); call update() first");
  torch::NoGradGuard no_grad;
  std::vector<DeviceGrads> devices;
  for (const torch::Tensor& p : parameters) {
    const torch::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    if (grad.scalar_type() == torch::kHalf)
      throw Error("loss scaling cannot unscale float16 gradients (as torch.amp.GradScaler)",
                  "keep the weights in float32: amp_fp16 lowers only the operators to float16");
    add(devices, grad.is_sparse() ? grad._values() : grad);
  }
  // A float32 reciprocal rounded once from float64, as GradScaler.unscale_ computes it.
  const torch::Tensor inv_scale = scale_.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
  const auto flag_options = torch::TensorOptions().dtype(torch::kFloat32);
  for (DeviceGrads& d : devices) {
    torch::Tensor found = torch::zeros({}, flag_options.device(d.device));
    const torch::Tensor inv = inv_scale.to(d.device, /*non_blocking=*/true);
    for (auto& same_dtype : d.by_dtype)
      at::_amp_foreach_non_finite_check_and_unscale_(same_dtype.second, found, inv);
    found_inf_.emplace_back(d.device, std::move(found));
  }
  stage_ = Stage::unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (stage_ == Stage::stepped)
    throw std::logic_error("GradScaler::step: already called since the last update()");
  if (stage_ == Stage::ready) {
    std::vector<torch::Tensor> parameters;
    for (const auto& group : optimizer.param_groups())
      parameters.insert(parameters.end(), group.params().begin(), group.params().end());
    unscale(parameters);
  }
  const bool finite = !found_inf();
  if (finite) optimizer.step();
  stage_ = Stage::stepped;
  return finite;
}

torch::Tensor GradScaler::found_inf_tensor() const {
  if (found_inf_.empty())
    throw std::logic_error(
        "GradScaler: no gradient was unscaled since the last update(), so none was checked "
        "for inf/nan; call unscale() or step() after backward");
  torch::Tensor sum = found_inf_.front().second.to(scale_.device(), /*non_blocking=*/true);
  for (std::size_t i = 1; i < found_inf_.size(); ++i)
    sum = sum + found_inf_[i].second.to(scale_.device(), /*non_blocking=*/true);
  return sum;
}

bool GradScaler::found_inf() const { return found_inf_tensor().item<float>() != 0.0F; }

void GradScaler::update() {
  const torch::Tensor found = found_inf_tensor();
  at::_amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  found_inf_.clear();
  stage_ = Stage::ready;
}

double GradScaler::current_scale() const {
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale;
}

std::int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<std::int32_t>() : 0;
}

}  // namespace runner::training
