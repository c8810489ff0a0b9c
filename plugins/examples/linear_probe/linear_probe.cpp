// Example out-of-tree plugin: `linear_probe`, a linear classifier (logistic
// regression) over flattened inputs, optionally with a frozen random
// projection in front of it, as in linear-probe evaluations.
#include <torch/nn/modules/linear.h>

#include <runner/sdk.hpp>

namespace {

struct LinearProbeOptions {
  std::int64_t projection = 0;
};

class LinearProbe final : public runner::ClassificationModel {
 public:
  LinearProbe(const LinearProbeOptions& options, const runner::ModelContext& context)
      : ClassificationModel(context) {
    std::int64_t width = input_features();
    if (options.projection > 0) {
      projection_ = register_module("projection", torch::nn::Linear(width, options.projection));
      for (auto& p : projection_->parameters()) p.set_requires_grad(false);
      width = options.projection;
    }
    head_ = register_module("head", torch::nn::Linear(width, num_classes()));
  }

  torch::Tensor forward(const torch::Tensor& inputs) override {
    torch::Tensor x = inputs.flatten(1);
    if (projection_) x = projection_->forward(x);
    return head_->forward(x);
  }

 private:
  torch::nn::Linear projection_{nullptr};
  torch::nn::Linear head_{nullptr};
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<LinearProbeOptions> options;
  options.field("projection", &LinearProbeOptions::projection,
                "width of a frozen random projection (0: none)")
      .range(0, 1 << 20);
  registrar.add_model("linear_probe", "linear classifier, optionally over a frozen projection",
                      options, [](const LinearProbeOptions& o, const runner::ModelContext& ctx) {
                        return std::make_unique<LinearProbe>(o, ctx);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
