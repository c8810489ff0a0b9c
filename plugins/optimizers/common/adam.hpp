// Adam and AdamW (plugins `adam` and `adamw`): PyTorch's torch.optim.Adam
// algorithm in its three implementations, written against ATen so that each
// matches the Python path of the same name operation for operation:
//   loop     _single_tensor_adam  (PyTorch's default on the CPU)
//   foreach  _multi_tensor_adam   (PyTorch's default on CUDA)
//   fused    _fused_adam          (at::_fused_adam_ / at::_fused_adamw_)
// LibTorch's own torch::optim::Adam is not used: its update is not the Python
// single-tensor sequence of operations (it has no foreach or fused path
// either), so it would not round like any PyTorch run.
#pragma once

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_maximum.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/maximum.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels.hpp"
#include "optimizer_common.hpp"

namespace runner_optimizers {

/// One parameter's Adam state, as PyTorch keeps it.
struct AdamState final : torch::optim::OptimizerCloneableParamState<AdamState> {
  torch::Tensor step;            ///< float32 scalar: on the CPU, on the parameter's device if fused
  torch::Tensor exp_avg;         ///< first moment
  torch::Tensor exp_avg_sq;      ///< second moment
  torch::Tensor max_exp_avg_sq;  ///< running maximum of the second moment (amsgrad only)
};

/// Adam over parameter groups whose options are `GroupOptions`: AdamOptions
/// (L2 penalty added to the gradient) or AdamWOptions (decoupled weight
/// decay), so the host reads and sets each group's lr through LibTorch's API.
template <typename GroupOptions>
class AdamFamily final : public torch::optim::Optimizer {
 public:
  static constexpr bool kDecoupled = std::is_same_v<GroupOptions, torch::optim::AdamWOptions>;

  AdamFamily(const std::vector<torch::optim::OptimizerParamGroup>& groups,
             const GroupOptions& defaults, Impl impl)
      : Optimizer(groups, std::make_unique<GroupOptions>(defaults)), impl_(impl) {
    runner::keep_group_options(*this, groups);
  }

  torch::Tensor step(LossClosure closure = nullptr) override {
    return run_step(closure, [&] {
      for (auto& group : param_groups_) step_group(group);
    });
  }

  /// Sets beta1 of every group (what OneCycleLR cycles for Adam).
  void set_momentum(double beta1) {
    for (auto& group : param_groups_) {
      auto& options = static_cast<GroupOptions&>(group.options());
      options.betas({beta1, std::get<1>(options.betas())});
    }
  }

 private:
  struct Lists {
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const GroupOptions&>(group.options());
    Buckets<Lists> buckets;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = dense_grad(p, kDecoupled ? "AdamW" : "Adam");
      AdamState& s = state_of<AdamState>(state_, p, [&] { return init(p, o.amsgrad()); });
      Lists& l = buckets.of(p);
      l.params.push_back(p);
      l.grads.push_back(grad);
      l.exp_avgs.push_back(s.exp_avg);
      l.exp_avg_sqs.push_back(s.exp_avg_sq);
      if (o.amsgrad()) l.max_exp_avg_sqs.push_back(s.max_exp_avg_sq);
      l.steps.push_back(s.step);
    }
    for (auto& [key, lists] : buckets) {
      switch (impl_) {
        case Impl::loop: loop(lists, o); break;
        case Impl::foreach: foreach(lists, o); break;
        case Impl::fused: fused(lists, o); break;
      }
    }
  }

  std::unique_ptr<AdamState> init(const torch::Tensor& p, bool amsgrad) const {
    auto s = std::make_unique<AdamState>();
    // The fused kernels read the step on the parameter's device; the other
    // paths read it on the host (PyTorch keeps it there for them).
    s->step = impl_ == Impl::fused
                  ? torch::zeros(at::IntArrayRef{}, p.options().dtype(torch::kFloat32))
                  : torch::zeros(at::IntArrayRef{}, torch::TensorOptions().dtype(torch::kFloat32));
    s->exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    s->exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    if (amsgrad) s->max_exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    return s;
  }

  static void loop(Lists& l, const GroupOptions& o) {
    const double lr = o.lr(), weight_decay = o.weight_decay(), eps = o.eps();
    const auto [beta1, beta2] = o.betas();
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      torch::Tensor& param = l.params[i];
      torch::Tensor grad = l.grads[i];
      l.steps[i].add_(1);
      if (weight_decay != 0) {
        if constexpr (kDecoupled) param.mul_(python_number(1 - lr * weight_decay));
        else grad = grad.add(param, weight_decay);
      }
      l.exp_avgs[i].lerp_(grad, 1 - beta1);
      l.exp_avg_sqs[i].mul_(python_number(beta2)).addcmul_(grad, grad, 1 - beta2);
      const double step = l.steps[i].template item<double>();
      const double step_size = lr / (1 - std::pow(beta1, step));
      const double bias_correction2_sqrt = std::pow(1 - std::pow(beta2, step), 0.5);
      torch::Tensor denom;
      if (o.amsgrad()) {
        at::maximum_out(l.max_exp_avg_sqs[i], l.max_exp_avg_sqs[i], l.exp_avg_sqs[i]);
        denom = (l.max_exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(eps);
      } else {
        denom = (l.exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(eps);
      }
      param.addcdiv_(l.exp_avgs[i], denom, -step_size);
    }
  }

  static void foreach(Lists& l, const GroupOptions& o) {
    const double lr = o.lr(), weight_decay = o.weight_decay(), eps = o.eps();
    const auto [beta1, beta2] = o.betas();
    at::_foreach_add_(l.steps, 1);
    std::vector<torch::Tensor> grads = l.grads;
    if (weight_decay != 0) {
      if constexpr (kDecoupled) at::_foreach_mul_(l.params, 1 - lr * weight_decay);
      else grads = at::_foreach_add(grads, l.params, weight_decay);
    }
    at::_foreach_lerp_(l.exp_avgs, grads, 1 - beta1);
    at::_foreach_mul_(l.exp_avg_sqs, beta2);
    at::_foreach_addcmul_(l.exp_avg_sqs, grads, grads, 1 - beta2);
    std::vector<at::Scalar> step_size, bias_correction2_sqrt;
    for (const torch::Tensor& step_t : l.steps) {
      const double step = step_t.template item<double>();
      step_size.emplace_back((lr / (1 - std::pow(beta1, step))) * -1);
      bias_correction2_sqrt.emplace_back(std::pow(1 - std::pow(beta2, step), 0.5));
    }
    std::vector<torch::Tensor> denom;
    if (o.amsgrad()) {
      at::_foreach_maximum_(l.max_exp_avg_sqs, l.exp_avg_sqs);
      denom = at::_foreach_sqrt(l.max_exp_avg_sqs);
    } else {
      denom = at::_foreach_sqrt(l.exp_avg_sqs);
    }
    at::_foreach_div_(denom, bias_correction2_sqrt);
    at::_foreach_add_(denom, eps);
    at::_foreach_addcdiv_(l.params, l.exp_avgs, denom, step_size);
  }

  static void fused(Lists& l, const GroupOptions& o) {
    const auto [beta1, beta2] = o.betas();
    at::_foreach_add_(l.steps, 1);
    if constexpr (kDecoupled) {
      at::_fused_adamw_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, l.max_exp_avg_sqs, l.steps,
                        o.lr(), beta1, beta2, o.weight_decay(), o.eps(), o.amsgrad(),
                        /*maximize=*/false, std::nullopt, std::nullopt);
    } else {
      at::_fused_adam_(l.params, l.grads, l.exp_avgs, l.exp_avg_sqs, l.max_exp_avg_sqs, l.steps,
                       o.lr(), beta1, beta2, o.weight_decay(), o.eps(), o.amsgrad(),
                       /*maximize=*/false, std::nullopt, std::nullopt);
    }
  }

  Impl impl_;
};

/// Declares the options of `adam` and `adamw` on a struct `O` with the fields
/// lr, betas, eps, weight_decay, amsgrad, no_decay and impl.
template <typename O>
void declare_adam_options(runner::OptionBinder<O>& options, const char* weight_decay_doc) {
  options.field("lr", &O::lr, "learning rate").range(0.0, std::nullopt);
  options.field("betas", &O::betas, "decay rates of the first and second moment estimates")
      .range(0.0, 1.0);
  options.field("eps", &O::eps, "added to the denominator").range(0.0, std::nullopt);
  options.field("weight_decay", &O::weight_decay, weight_decay_doc).range(0.0, std::nullopt);
  options.field("amsgrad", &O::amsgrad, "AMSGrad: divide by the running maximum of the second "
                                        "moment");
  options.field("no_decay", &O::no_decay,
                "name or module-type patterns of parameters without weight decay, e.g. "
                "[\"bias\", \"norm\"]");
  options.field("impl", &O::impl,
                "loop (PyTorch's CPU default), foreach (multi-tensor) or fused (one kernel)")
      .one_of({"loop", "foreach", "fused"});
}

/// Builds `adam` (GroupOptions = AdamOptions) or `adamw` (AdamWOptions) from
/// the options struct `O` declared by declare_adam_options.
template <typename GroupOptions, typename O>
std::unique_ptr<runner::Optimizer> make_adam(const O& o, const runner::OptimizerContext& context) {
  const Impl impl = parse_impl(o.impl);
  if (impl == Impl::fused)
    require_fused_kernel(AdamFamily<GroupOptions>::kDecoupled ? "aten::_fused_adamw_"
                                                              : "aten::_fused_adam_",
                         context.device);
  check_betas(o.betas);
  GroupOptions options(o.lr);
  options.betas({o.betas[0], o.betas[1]}).eps(o.eps).weight_decay(o.weight_decay).amsgrad(o.amsgrad);
  auto optimizer = std::make_unique<AdamFamily<GroupOptions>>(
      runner::decay_groups(context, o.no_decay, options), options, impl);
  return std::make_unique<runner::OwnedOptimizer<AdamFamily<GroupOptions>, true>>(std::move(optimizer));
}

}  // namespace runner_optimizers
