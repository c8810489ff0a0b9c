// Gradient clipping by global L2 norm (clip.hpp).
#include "runner/training/clip.hpp"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/stack.h>
#include <torch/utils.h>

#include <optional>

namespace runner::training {
namespace {

struct Group {
  c10::Device device;
  c10::ScalarType dtype;
  std::vector<torch::Tensor> tensors;
};

// PyTorch groups by (device, dtype) and uses the multi-tensor kernels where
// the device has them; the grouping only changes the summation order of the
// total, never which gradients are scaled.
std::vector<Group> by_device_and_dtype(const std::vector<torch::Tensor>& tensors) {
  std::vector<Group> groups;
  for (const torch::Tensor& t : tensors) {
    Group* group = nullptr;
    for (Group& g : groups)
      if (g.device == t.device() && g.dtype == t.scalar_type()) group = &g;
    if (group == nullptr) group = &groups.emplace_back(Group{t.device(), t.scalar_type(), {}});
    group->tensors.push_back(t);
  }
  return groups;
}

bool has_foreach_kernels(const c10::Device& device) { return device.is_cpu() || device.is_cuda(); }

}  // namespace

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({});

  const std::vector<Group> groups = by_device_and_dtype(grads);
  std::vector<torch::Tensor> norms;
  for (const Group& g : groups) {
    if (has_foreach_kernels(g.device)) {
      for (torch::Tensor& n : at::_foreach_norm(g.tensors, 2.0)) norms.push_back(std::move(n));
    } else {
      for (const torch::Tensor& t : g.tensors) norms.push_back(at::linalg_vector_norm(t, 2.0));
    }
  }
  const c10::Device first = grads.front().device();
  for (torch::Tensor& n : norms) n = n.to(first);
  torch::Tensor total = at::linalg_vector_norm(at::stack(norms), 2.0);

  // Python's `max_norm / (total + 1e-6)` is Tensor.__rtruediv__, a
  // reciprocal then a product, and its clamp keeps a NaN: written the same
  // way for the same rounding.
  const torch::Tensor coefficient =
      ((total + 1e-6).reciprocal() * max_norm).clamp(std::nullopt, 1.0);
  for (const Group& g : groups) {
    const torch::Tensor factor = coefficient.to(g.device);
    if (has_foreach_kernels(g.device)) {
      at::_foreach_mul_(g.tensors, factor);
    } else {
      for (const torch::Tensor& t : g.tensors) t.mul_(factor);
    }
  }
  return total;
}

}  // namespace runner::training
