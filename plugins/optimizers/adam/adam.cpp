// Optimizer `adam`: PyTorch's torch.optim.Adam (L2 penalty added to the
// gradient), impl = "loop" | "foreach" | "fused" (../common/adam.hpp).
#include <runner/sdk.hpp>

#include "../common/adam.hpp"

namespace {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  std::vector<std::string> no_decay{};
  std::string impl = "loop";
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<AdamOptions> options;
  runner_optimizers::declare_adam_options(options, "L2 penalty added to the gradient");
  registrar.add_optimizer(
      "adam", "Adam, as torch.optim.Adam (impl: loop, foreach or fused)", options,
      [](const AdamOptions& o, const runner::OptimizerContext& context) {
        return runner_optimizers::make_adam<torch::optim::AdamOptions>(o, context);
      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
