// Example out-of-tree plugin: `linear_probe`, a linear classifier (logistic
// regression) over flattened inputs, optionally with a frozen random
// projection in front of it, as in linear-probe evaluations.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>

#include <runner/sdk.hpp>

namespace {

class LinearProbe final : public runner::Model {
 public:
  LinearProbe(const runner::Options& options, const runner::ModelContext& context)
      : shape_(context.input_shape) {
    std::int64_t features = 1;
    for (auto d : shape_) features *= d;
    const std::int64_t projection = options.integer("projection");
    std::int64_t width = features;
    if (projection > 0) {
      projection_ = root_->register_module("projection", torch::nn::Linear(features, projection));
      for (auto& p : projection_->parameters()) p.set_requires_grad(false);
      width = projection;
    }
    head_ = root_->register_module("head", torch::nn::Linear(width, context.num_classes));
    features_ = features;
  }

  torch::nn::Module& module() override { return *root_; }

  torch::Tensor forward(const runner::Batch& batch) override {
    torch::Tensor x = batch.inputs.reshape({batch.inputs.size(0), features_});
    if (projection_) x = projection_->forward(x);
    return head_->forward(x);
  }

  torch::Tensor loss(const torch::Tensor& output, const runner::Batch& batch) override {
    return torch::nn::functional::cross_entropy(output, batch.targets);
  }

  runner::Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    std::vector<std::int64_t> shape{batch_size};
    shape.insert(shape.end(), shape_.begin(), shape_.end());
    return {torch::randn(shape, torch::TensorOptions().device(device)), {}, batch_size};
  }

 private:
  std::shared_ptr<torch::nn::Module> root_ = std::make_shared<torch::nn::Module>();
  torch::nn::Linear projection_{nullptr};
  torch::nn::Linear head_{nullptr};
  std::vector<std::int64_t> shape_;
  std::int64_t features_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionSchema options;
  options.integer("projection", 0, "width of a frozen random projection (0: none)")
      .range(0, 1 << 20);
  registrar.add_model("linear_probe", "linear classifier, optionally over a frozen projection",
                      std::move(options),
                      [](const runner::Options& o, const runner::ModelContext& ctx) {
                        return std::make_unique<LinearProbe>(o, ctx);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
