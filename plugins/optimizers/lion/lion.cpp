// Optimizer `lion`: Lion (Chen et al. 2023, "Symbolic Discovery of
// Optimization Algorithms"), the example of an optimizer LibTorch does not
// ship: its own options class (lr through LibTorch's get_lr/set_lr, so
// schedules work) and per-parameter state. Per parameter p with gradient g
// and momentum m:
//   p *= 1 - lr * weight_decay              (decoupled, as AdamW)
//   p -= lr * sign(beta1 * m + (1 - beta1) * g)
//   m  = beta2 * m + (1 - beta2) * g
// impl = "loop" (one parameter at a time) or "foreach" (at::_foreach_* over a
// group); both run the same sequence of operations, so they agree exactly.
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sign.h>
#include <torch/arg.h>

#include <tuple>

#include <runner/sdk.hpp>

#include "../common/optimizer_common.hpp"

namespace {

using runner_optimizers::Impl;

/// Lion's per-group options, in the style of LibTorch's AdamOptions.
struct LionOptions : public torch::optim::OptimizerCloneableOptions<LionOptions> {
  using betas_t = std::tuple<double, double>;
  explicit LionOptions(double lr = 1e-4) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-4;
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.99);
  TORCH_ARG(double, weight_decay) = 0;
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct LionState final : torch::optim::OptimizerCloneableParamState<LionState> {
  torch::Tensor exp_avg;  // momentum m
};

class Lion final : public torch::optim::Optimizer {
 public:
  Lion(const std::vector<torch::optim::OptimizerParamGroup>& groups, const LionOptions& defaults,
       Impl impl)
      : Optimizer(groups, std::make_unique<LionOptions>(defaults)), impl_(impl) {
    runner::keep_group_options(*this, groups);
  }

  torch::Tensor step(LossClosure closure = nullptr) override {
    return runner_optimizers::run_step(closure, [&] {
      for (auto& group : param_groups_) step_group(group);
    });
  }

  /// Sets beta1 of every group (the interpolation that gives the update's sign).
  void set_momentum(double beta1) {
    for (auto& group : param_groups_) {
      auto& options = static_cast<LionOptions&>(group.options());
      options.betas({beta1, std::get<1>(options.betas())});
    }
  }

 private:
  struct Lists {
    std::vector<torch::Tensor> params, grads, exp_avgs;
  };

  void step_group(torch::optim::OptimizerParamGroup& group) {
    const auto& o = static_cast<const LionOptions&>(group.options());
    runner_optimizers::Buckets<Lists> buckets;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& grad = runner_optimizers::dense_grad(p, "Lion");
      auto& s = runner_optimizers::state_of<LionState>(state_, p, [&] {
        auto made = std::make_unique<LionState>();
        made->exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
        return made;
      });
      Lists& l = buckets.of(p);
      l.params.push_back(p);
      l.grads.push_back(grad);
      l.exp_avgs.push_back(s.exp_avg);
    }
    for (auto& [key, lists] : buckets) {
      if (impl_ == Impl::foreach) foreach(lists, o);
      else loop(lists, o);
    }
  }

  static void loop(Lists& l, const LionOptions& o) {
    const double lr = o.lr(), weight_decay = o.weight_decay();
    const auto [beta1, beta2] = o.betas();
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      torch::Tensor& param = l.params[i];
      const torch::Tensor& grad = l.grads[i];
      torch::Tensor& exp_avg = l.exp_avgs[i];
      if (weight_decay != 0) param.mul_(runner_optimizers::python_number(1 - lr * weight_decay));
      const torch::Tensor update =
          exp_avg.mul(runner_optimizers::python_number(beta1)).add_(grad, 1 - beta1).sign_();
      param.add_(update, -lr);
      exp_avg.mul_(runner_optimizers::python_number(beta2)).add_(grad, 1 - beta2);
    }
  }

  static void foreach(Lists& l, const LionOptions& o) {
    const double lr = o.lr(), weight_decay = o.weight_decay();
    const auto [beta1, beta2] = o.betas();
    if (weight_decay != 0) at::_foreach_mul_(l.params, 1 - lr * weight_decay);
    std::vector<torch::Tensor> update = at::_foreach_mul(l.exp_avgs, beta1);
    at::_foreach_add_(update, l.grads, 1 - beta1);
    at::_foreach_sign_(update);
    at::_foreach_add_(l.params, update, -lr);
    at::_foreach_mul_(l.exp_avgs, beta2);
    at::_foreach_add_(l.exp_avgs, l.grads, 1 - beta2);
  }

  Impl impl_;
};

struct LionPluginOptions {
  double lr = 1e-4;
  std::array<double, 2> betas{0.9, 0.99};
  double weight_decay = 0.0;
  std::vector<std::string> no_decay{};
  std::string impl = "loop";
};

void register_plugins(runner::Registrar& registrar) {
  using O = LionPluginOptions;
  runner::OptionBinder<O> options;
  options.field("lr", &O::lr, "learning rate (Lion's update has norm 1 per element: ~10x below "
                              "AdamW's)")
      .range(0.0, std::nullopt);
  options.field("betas", &O::betas,
                "beta1 interpolates the update's sign, beta2 the momentum kept")
      .range(0.0, 1.0);
  options.field("weight_decay", &O::weight_decay,
                "decoupled weight decay: p *= 1 - lr * weight_decay")
      .range(0.0, std::nullopt);
  options.field("no_decay", &O::no_decay,
                "name or module-type patterns of parameters without weight decay, e.g. "
                "[\"bias\", \"norm\"]");
  options.field("impl", &O::impl, "loop (one parameter at a time) or foreach (multi-tensor)")
      .one_of({"loop", "foreach"});
  registrar.add_optimizer(
      "lion", "Lion (Chen et al. 2023): sign of interpolated momentum (impl: loop or foreach)",
      options, [](const O& o, const runner::OptimizerContext& context) {
        runner_optimizers::check_betas(o.betas);
        LionOptions group(o.lr);
        group.betas({o.betas[0], o.betas[1]}).weight_decay(o.weight_decay);
        auto optimizer = std::make_unique<Lion>(
            runner::decay_groups(context, o.no_decay, group), group,
            runner_optimizers::parse_impl(o.impl));
        return std::make_unique<runner::OwnedOptimizer<Lion, true>>(std::move(optimizer));
      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
