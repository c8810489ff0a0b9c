// Optimizer `rmsprop`: PyTorch's torch.optim.RMSprop, impl = "loop"
// (_single_tensor_rmsprop, PyTorch's CPU default) or "foreach"
// (_multi_tensor_rmsprop), each matching the Python path operation for
// operation. ATen has no fused RMSprop kernel, so there is no "fused".
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_lerp.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <torch/optim/rmsprop.h>

#include <runner/sdk.hpp>

#include "../common/optimizer_common.hpp"

namespace {

using runner_optimizers::Impl;

struct RmspropState final : torch::optim::OptimizerCloneableParamState<RmspropState> {
  torch::Tensor step;             // float32 scalar on the CPU, as PyTorch keeps it
  torch::Tensor square_avg;
  torch::Tensor momentum_buffer;  // made at the first step with momentum > 0
  torch::Tensor grad_avg;         // centered only
};

class Rmsprop final : public torch::optim::Optimizer {
 public:
  Rmsprop(const std::vector<torch::optim::OptimizerParamGroup>& groups,
          const torch::optim::RMSpropOptions& defaults, Impl impl)
      : Optimizer(groups, std::make_unique<torch::optim::RMSpropOptions>(defaults)), impl_(impl) {
    runner::keep_group_options(*this, groups);
  }

  torch::Tensor step(LossClosure closure = nullptr) override {
    return runner_optimizers::run_step(closure, [&] {
      for (auto& group : param_groups_) step_group(group);
    });
  }

  // PyTorch's OneCycleLR cycles RMSprop's momentum even when it was built
  // with momentum 0: the buffer is then made at the first step that uses it.
  void set_momentum(double momentum) {
    for (auto& group : param_groups_)
      static_cast<torch::optim::RMSpropOptions&>(group.options()).momentum(momentum);
  }

 private:
  struct Lists {
    std::vector<torch::Tensor> params, grads, square_avgs, grad_avgs, momentum_buffers, steps;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const torch::optim::RMSpropOptions&>(group.options());
    runner_optimizers::Buckets<Lists> buckets;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = runner_optimizers::dense_grad(p, "RMSprop");
      auto& s = runner_optimizers::state_of<RmspropState>(state_, p, [&] {
        auto made = std::make_unique<RmspropState>();
        made->step = torch::zeros(at::IntArrayRef{}, torch::TensorOptions().dtype(torch::kFloat32));
        made->square_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
        return made;
      });
      if (o.momentum() > 0 && !s.momentum_buffer.defined())
        s.momentum_buffer = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      if (o.centered() && !s.grad_avg.defined())
        s.grad_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      Lists& l = buckets.of(p);
      l.params.push_back(p);
      l.grads.push_back(grad);
      l.square_avgs.push_back(s.square_avg);
      if (o.centered()) l.grad_avgs.push_back(s.grad_avg);
      if (o.momentum() > 0) l.momentum_buffers.push_back(s.momentum_buffer);
      l.steps.push_back(s.step);
    }
    for (auto& [key, lists] : buckets) {
      if (impl_ == Impl::foreach) foreach(lists, o);
      else loop(lists, o);
    }
  }

  static void loop(Lists& l, const torch::optim::RMSpropOptions& o) {
    const double lr = o.lr(), alpha = o.alpha(), eps = o.eps(), momentum = o.momentum();
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      torch::Tensor& param = l.params[i];
      torch::Tensor grad = l.grads[i];
      l.steps[i].add_(1);
      if (o.weight_decay() != 0) grad = grad.add(param, o.weight_decay());
      l.square_avgs[i].mul_(runner_optimizers::python_number(alpha)).addcmul_(grad, grad, 1 - alpha);
      torch::Tensor avg;
      if (o.centered()) {
        l.grad_avgs[i].lerp_(grad, 1 - alpha);
        avg = l.square_avgs[i].addcmul(l.grad_avgs[i], l.grad_avgs[i], -1).sqrt_();
      } else {
        avg = l.square_avgs[i].sqrt();
      }
      avg.add_(eps);
      if (momentum > 0) {
        l.momentum_buffers[i].mul_(runner_optimizers::python_number(momentum)).addcdiv_(grad, avg);
        param.add_(l.momentum_buffers[i], -lr);
      } else {
        param.addcdiv_(grad, avg, -lr);
      }
    }
  }

  static void foreach(Lists& l, const torch::optim::RMSpropOptions& o) {
    const double lr = o.lr(), alpha = o.alpha(), eps = o.eps(), momentum = o.momentum();
    at::_foreach_add_(l.steps, 1);
    std::vector<torch::Tensor> grads = l.grads;
    if (o.weight_decay() != 0) grads = at::_foreach_add(grads, l.params, o.weight_decay());
    at::_foreach_mul_(l.square_avgs, alpha);
    at::_foreach_addcmul_(l.square_avgs, grads, grads, 1 - alpha);
    std::vector<torch::Tensor> avg;
    if (o.centered()) {
      at::_foreach_lerp_(l.grad_avgs, grads, 1 - alpha);
      avg = at::_foreach_addcmul(l.square_avgs, l.grad_avgs, l.grad_avgs, -1);
      at::_foreach_sqrt_(avg);
    } else {
      avg = at::_foreach_sqrt(l.square_avgs);
    }
    at::_foreach_add_(avg, eps);
    if (momentum > 0) {
      at::_foreach_mul_(l.momentum_buffers, momentum);
      at::_foreach_addcdiv_(l.momentum_buffers, grads, avg);
      at::_foreach_add_(l.params, l.momentum_buffers, -lr);
    } else {
      at::_foreach_addcdiv_(l.params, grads, avg, -lr);
    }
  }

  Impl impl_;
};

struct RmspropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  std::vector<std::string> no_decay{};
  std::string impl = "loop";
};

void register_plugins(runner::Registrar& registrar) {
  using O = RmspropOptions;
  runner::OptionBinder<O> options;
  options.field("lr", &O::lr, "learning rate").range(0.0, std::nullopt);
  options.field("alpha", &O::alpha, "smoothing constant of the squared-gradient average")
      .range(0.0, std::nullopt);
  options.field("eps", &O::eps, "added to the denominator").range(0.0, std::nullopt);
  options.field("weight_decay", &O::weight_decay, "L2 penalty added to the gradient")
      .range(0.0, std::nullopt);
  options.field("momentum", &O::momentum, "momentum factor").range(0.0, std::nullopt);
  options.field("centered", &O::centered,
                "divide by the estimated variance of the gradient instead of its second moment");
  options.field("no_decay", &O::no_decay,
                "name or module-type patterns of parameters without weight decay, e.g. "
                "[\"bias\", \"norm\"]");
  options.field("impl", &O::impl, "loop (PyTorch's CPU default) or foreach (multi-tensor)")
      .one_of({"loop", "foreach"});
  registrar.add_optimizer(
      "rmsprop", "RMSprop, as torch.optim.RMSprop (impl: loop or foreach)", options,
      [](const O& o, const runner::OptimizerContext& context) {
        torch::optim::RMSpropOptions group(o.lr);
        group.alpha(o.alpha).eps(o.eps).weight_decay(o.weight_decay).momentum(o.momentum).centered(
            o.centered);
        auto optimizer = std::make_unique<Rmsprop>(
            runner::decay_groups(context, o.no_decay, group),
            group, runner_optimizers::parse_impl(o.impl));
        return std::make_unique<runner::OwnedOptimizer<Rmsprop, true>>(std::move(optimizer));
      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
