// Optimizer `sgd`: LibTorch's SGD with momentum, Nesterov and weight decay.
#include <torch/optim/sgd.h>

#include <runner/sdk.hpp>

#include <stdexcept>

namespace {

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

class Sgd final : public runner::Optimizer {
 public:
  Sgd(const SgdOptions& o, const runner::OptimizerContext& context) {
    // LibTorch would throw later with a less helpful message.
    if (o.nesterov && o.momentum <= 0.0)
      throw std::invalid_argument("nesterov = true needs momentum > 0");
    torch::optim::SGDOptions sgd_options(o.lr);
    sgd_options.momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weight_decay);
    optimizer_ = std::make_unique<torch::optim::SGD>(context.parameters, sgd_options);
  }

  torch::optim::Optimizer& get() override { return *optimizer_; }

 private:
  std::unique_ptr<torch::optim::SGD> optimizer_;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<SgdOptions> options;
  options.field("lr", &SgdOptions::lr, "learning rate").range(0.0, std::nullopt);
  options.field("momentum", &SgdOptions::momentum, "momentum factor").range(0.0, 1.0);
  options.field("nesterov", &SgdOptions::nesterov, "Nesterov momentum (needs momentum > 0)");
  options.field("weight_decay", &SgdOptions::weight_decay, "L2 penalty").range(0.0, std::nullopt);
  registrar.add_optimizer("sgd", "stochastic gradient descent (torch::optim::SGD)", options,
                          [](const SgdOptions& o, const runner::OptimizerContext& ctx) {
                            return std::make_unique<Sgd>(o, ctx);
                          });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
