// Optimizer `sgd`: SGD with momentum, Nesterov and weight decay, the same
// sequence of operations as PyTorch's _single_tensor_sgd.
#include <torch/optim/sgd.h>

#include <runner/sdk.hpp>

#include <stdexcept>

#include "../common/optimizer_common.hpp"

namespace {

// LibTorch's SGD with PyTorch's single-tensor step. LibTorch multiplies the
// momentum buffer by a Scalar (aten::mul_.Scalar), which rounds 0.9 to the
// buffer's dtype first: with bf16 parameters the result drifts from
// torch.optim.SGD, whose Python float reaches ATen as a wrapped 0-dim double
// tensor and is applied in float. This step passes it the same way
// (runner_optimizers::python_number); in float32 nothing changes.
class PyTorchSgd final : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;

  torch::Tensor step(LossClosure closure = nullptr) override {
    return runner_optimizers::run_step(closure, [&] {
      for (auto& group : param_groups()) {
        const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
        for (auto& p : group.params())
          if (p.grad().defined()) update(p, o);
      }
    });
  }

 private:
  void update(torch::Tensor& p, const torch::optim::SGDOptions& o) {
    torch::Tensor grad = p.grad();
    if (o.weight_decay() != 0) grad = grad.add(p, o.weight_decay());
    if (o.momentum() != 0) {
      bool made = false;
      auto& state = runner_optimizers::state_of<torch::optim::SGDParamState>(state_, p, [&] {
        made = true;
        auto fresh = std::make_unique<torch::optim::SGDParamState>();
        fresh->momentum_buffer(torch::clone(grad).detach());
        return fresh;
      });
      torch::Tensor& buffer = state.momentum_buffer();
      if (!made)
        buffer.mul_(runner_optimizers::python_number(o.momentum())).add_(grad, 1 - o.dampening());
      grad = o.nesterov() ? grad.add(buffer, o.momentum()) : buffer;
    }
    p.add_(grad, -o.lr());
  }
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::vector<std::string> no_decay{};
};

// LibTorch would throw later with a less helpful message. The host checks
// every trial with it before any run; the factory checks again for direct callers.
void check_options(const SgdOptions& o) {
  if (o.nesterov && o.momentum <= 0.0)
    throw runner::OptionError("nesterov", "nesterov = true needs momentum > 0");
}

class Sgd final : public runner::Optimizer {
 public:
  Sgd(const SgdOptions& o, const runner::OptimizerContext& context) {
    check_options(o);
    torch::optim::SGDOptions sgd_options(o.lr);
    sgd_options.momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weight_decay);
    if (o.no_decay.empty()) {
      optimizer_ = std::make_unique<PyTorchSgd>(context.parameters, sgd_options);
    } else {
      const auto groups = runner::decay_groups(context, o.no_decay, sgd_options);
      optimizer_ = std::make_unique<PyTorchSgd>(groups, sgd_options);
      runner::keep_group_options(*optimizer_, groups);
    }
  }

  torch::optim::Optimizer& get() override { return *optimizer_; }

  // PyTorch's OneCycleLR cycles SGD's momentum whatever it was built with;
  // LibTorch's SGD, like PyTorch's, makes the buffer at the first step that
  // uses it.
  bool set_momentum(double momentum) override {
    for (auto& group : optimizer_->param_groups())
      static_cast<torch::optim::SGDOptions&>(group.options()).momentum(momentum);
    return true;
  }

 private:
  std::unique_ptr<PyTorchSgd> optimizer_;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<SgdOptions> options;
  options.field("lr", &SgdOptions::lr, "learning rate").range(0.0, std::nullopt);
  options.field("momentum", &SgdOptions::momentum, "momentum factor").range(0.0, 1.0);
  options.field("nesterov", &SgdOptions::nesterov, "Nesterov momentum (needs momentum > 0)");
  options.field("weight_decay", &SgdOptions::weight_decay, "L2 penalty").range(0.0, std::nullopt);
  // Added after sgd trials were recorded: trials without it keep their identity.
  options
      .field("no_decay", &SgdOptions::no_decay,
             "name or module-type patterns of parameters without weight decay, e.g. "
             "[\"bias\", \"norm\"]")
      .added_later_with_default();
  options.check(check_options);
  registrar.add_optimizer("sgd", "stochastic gradient descent (torch::optim::SGD)", options,
                          [](const SgdOptions& o, const runner::OptimizerContext& ctx) {
                            return std::make_unique<Sgd>(o, ctx);
                          });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
