// Optimizer `adagrad`: PyTorch's torch.optim.Adagrad, impl = "loop"
// (_single_tensor_adagrad, PyTorch's CPU default), "foreach"
// (_multi_tensor_adagrad) or "fused" (at::_fused_adagrad_), each matching the
// Python path operation for operation. Adagrad has no momentum to cycle.
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_fused_adagrad.h>
#include <torch/optim/adagrad.h>

#include <optional>

#include <runner/sdk.hpp>

#include "../common/kernels.hpp"
#include "../common/optimizer_common.hpp"

namespace {

using runner_optimizers::Impl;

struct AdagradState final : torch::optim::OptimizerCloneableParamState<AdagradState> {
  torch::Tensor step;  // float32 scalar: on the CPU, on the parameter's device if fused
  torch::Tensor sum;   // running sum of squared gradients
};

class Adagrad final : public torch::optim::Optimizer {
 public:
  Adagrad(const std::vector<torch::optim::OptimizerParamGroup>& groups,
          const torch::optim::AdagradOptions& defaults, Impl impl)
      : Optimizer(groups, std::make_unique<torch::optim::AdagradOptions>(defaults)), impl_(impl) {
    runner::keep_group_options(*this, groups);
  }

  torch::Tensor step(LossClosure closure = nullptr) override {
    return runner_optimizers::run_step(closure, [&] {
      for (auto& group : param_groups_) step_group(group);
    });
  }

 private:
  struct Lists {
    std::vector<torch::Tensor> params, grads, sums, steps;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const torch::optim::AdagradOptions&>(group.options());
    runner_optimizers::Buckets<Lists> buckets;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = runner_optimizers::dense_grad(p, "Adagrad");
      auto& s = runner_optimizers::state_of<AdagradState>(state_, p, [&] {
        auto made = std::make_unique<AdagradState>();
        made->step = impl_ == Impl::fused
                         ? torch::zeros(at::IntArrayRef{}, p.options().dtype(torch::kFloat32))
                         : torch::zeros(at::IntArrayRef{},
                                        torch::TensorOptions().dtype(torch::kFloat32));
        made->sum = torch::full_like(p, o.initial_accumulator_value(), {},
                                     torch::MemoryFormat::Preserve);
        return made;
      });
      Lists& l = buckets.of(p);
      l.params.push_back(p);
      l.grads.push_back(grad);
      l.sums.push_back(s.sum);
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

  static void loop(Lists& l, const torch::optim::AdagradOptions& o) {
    const double lr = o.lr(), lr_decay = o.lr_decay(), weight_decay = o.weight_decay();
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      torch::Tensor& param = l.params[i];
      torch::Tensor grad = l.grads[i];
      l.steps[i].add_(1);
      const double step = l.steps[i].item<double>();
      if (weight_decay != 0) grad = grad.add(param, weight_decay);
      const double clr = lr / (1 + (step - 1) * lr_decay);
      l.sums[i].addcmul_(grad, grad, 1);
      const torch::Tensor denom = l.sums[i].sqrt().add_(o.eps());
      param.addcdiv_(grad, denom, -clr);
    }
  }

  static void foreach(Lists& l, const torch::optim::AdagradOptions& o) {
    const double lr = o.lr(), lr_decay = o.lr_decay(), weight_decay = o.weight_decay();
    at::_foreach_add_(l.steps, 1);
    std::vector<torch::Tensor> grads = l.grads;
    if (weight_decay != 0) grads = at::_foreach_add(grads, l.params, weight_decay);
    std::vector<at::Scalar> minus_clr;
    for (const torch::Tensor& step : l.steps)
      minus_clr.emplace_back(-lr / (1 + (step.item<double>() - 1) * lr_decay));
    at::_foreach_addcmul_(l.sums, grads, grads, 1);
    std::vector<torch::Tensor> denom = at::_foreach_sqrt(l.sums);
    at::_foreach_add_(denom, o.eps());
    // With weight decay, `grads` is already a new list the update may scale
    // in place; without, it holds the parameters' own gradients.
    std::vector<torch::Tensor> numerator;
    if (weight_decay != 0) {
      at::_foreach_mul_(grads, minus_clr);
      numerator = std::move(grads);
    } else {
      numerator = at::_foreach_mul(grads, minus_clr);
    }
    at::_foreach_addcdiv_(l.params, numerator, denom);
  }

  static void fused(Lists& l, const torch::optim::AdagradOptions& o) {
    at::_foreach_add_(l.steps, 1);
    at::_fused_adagrad_(l.params, l.grads, l.sums, l.steps, o.lr(), o.lr_decay(), o.weight_decay(),
                        o.eps(), /*maximize=*/false, std::nullopt, std::nullopt);
  }

  Impl impl_;
};

struct AdagradPluginOptions {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  std::vector<std::string> no_decay{};
  std::string impl = "loop";
};

void register_plugins(runner::Registrar& registrar) {
  using O = AdagradPluginOptions;
  runner::OptionBinder<O> options;
  options.field("lr", &O::lr, "learning rate").range(0.0, std::nullopt);
  options.field("lr_decay", &O::lr_decay, "learning rate at step t: lr / (1 + (t - 1) * lr_decay)")
      .range(0.0, std::nullopt);
  options.field("weight_decay", &O::weight_decay, "L2 penalty added to the gradient")
      .range(0.0, std::nullopt);
  options.field("initial_accumulator_value", &O::initial_accumulator_value,
                "starting value of the sum of squared gradients")
      .range(0.0, std::nullopt);
  options.field("eps", &O::eps, "added to the denominator").range(0.0, std::nullopt);
  options.field("no_decay", &O::no_decay,
                "name or module-type patterns of parameters without weight decay, e.g. "
                "[\"bias\", \"norm\"]");
  options.field("impl", &O::impl,
                "loop (PyTorch's CPU default), foreach (multi-tensor) or fused (one kernel)")
      .one_of({"loop", "foreach", "fused"});
  registrar.add_optimizer(
      "adagrad", "Adagrad, as torch.optim.Adagrad (impl: loop, foreach or fused)", options,
      [](const O& o, const runner::OptimizerContext& context) {
        const Impl impl = runner_optimizers::parse_impl(o.impl);
        if (impl == Impl::fused)
          runner_optimizers::require_fused_kernel("aten::_fused_adagrad_", context.device);
        torch::optim::AdagradOptions group(o.lr);
        group.lr_decay(o.lr_decay)
            .weight_decay(o.weight_decay)
            .initial_accumulator_value(o.initial_accumulator_value)
            .eps(o.eps);
        auto optimizer =
            std::make_unique<Adagrad>(runner::decay_groups(context, o.no_decay, group),
                                      group, impl);
        return std::make_unique<runner::OwnedOptimizer<Adagrad, false>>(std::move(optimizer));
      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
