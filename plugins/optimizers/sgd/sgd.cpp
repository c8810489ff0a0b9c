// Optimizer `sgd`: LibTorch's SGD with momentum, Nesterov and weight decay.
#include <torch/optim/sgd.h>

#include <runner/sdk.hpp>

#include <stdexcept>

namespace {

class Sgd final : public runner::Optimizer {
 public:
  Sgd(const runner::Options& options, const runner::OptimizerContext& context) {
    const bool nesterov = options.boolean("nesterov");
    const double momentum = options.number("momentum");
    // LibTorch would throw later with a less helpful message.
    if (nesterov && momentum <= 0.0)
      throw std::invalid_argument("nesterov = true needs momentum > 0");
    torch::optim::SGDOptions sgd_options(options.number("lr"));
    sgd_options.momentum(momentum).nesterov(nesterov).weight_decay(options.number("weight_decay"));
    optimizer_ = std::make_unique<torch::optim::SGD>(context.parameters, sgd_options);
  }

  torch::optim::Optimizer& get() override { return *optimizer_; }

 private:
  std::unique_ptr<torch::optim::SGD> optimizer_;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionSchema options;
  options.number("lr", 0.01, "learning rate").range(0.0, std::nullopt);
  options.number("momentum", 0.0, "momentum factor").range(0.0, 1.0);
  options.boolean("nesterov", false, "Nesterov momentum (needs momentum > 0)");
  options.number("weight_decay", 0.0, "L2 penalty").range(0.0, std::nullopt);
  registrar.add_optimizer("sgd", "stochastic gradient descent (torch::optim::SGD)",
                          std::move(options),
                          [](const runner::Options& o, const runner::OptimizerContext& ctx) {
                            return std::make_unique<Sgd>(o, ctx);
                          });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
