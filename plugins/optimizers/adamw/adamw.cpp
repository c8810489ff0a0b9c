// Optimizer `adamw`: PyTorch's torch.optim.AdamW (decoupled weight decay),
// impl = "loop" | "foreach" | "fused" (../common/adam.hpp).
#include <runner/sdk.hpp>

#include "../common/adam.hpp"

namespace {

struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  bool amsgrad = false;
  std::vector<std::string> no_decay{};
  std::string impl = "loop";
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<AdamWOptions> options;
  runner_optimizers::declare_adam_options(options,
                                      "decoupled weight decay: p *= 1 - lr * weight_decay");
  registrar.add_optimizer(
      "adamw", "AdamW, as torch.optim.AdamW (impl: loop, foreach or fused)", options,
      [](const AdamWOptions& o, const runner::OptimizerContext& context) {
        return runner_optimizers::make_adam<torch::optim::AdamWOptions>(o, context);
      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
