// Model `mlp`: a multi-layer perceptron over flattened inputs, with
// configurable hidden sizes, activation and dropout; cross-entropy loss.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <runner/sdk.hpp>

#include <stdexcept>

namespace {

class Mlp final : public runner::Model {
 public:
  Mlp(const runner::Options& options, const runner::ModelContext& context) {
    if (context.input_shape.empty())
      throw std::invalid_argument("mlp needs a loader that declares an input shape");
    if (context.num_classes < 1)
      throw std::invalid_argument("mlp is a classifier: the loader must declare num_classes >= 1");
    input_shape_ = context.input_shape;
    in_features_ = 1;
    for (auto d : input_shape_) in_features_ *= d;
    const auto& hidden = options.integers("hidden");
    const std::string& activation = options.string("activation");
    const double dropout = options.number("dropout");

    std::int64_t width = in_features_;
    for (std::int64_t h : hidden) {
      net_->push_back(torch::nn::Linear(width, h));
      if (activation == "relu") {
        net_->push_back(torch::nn::ReLU());
      } else if (activation == "gelu") {
        net_->push_back(torch::nn::GELU());
      } else {
        net_->push_back(torch::nn::Tanh());
      }
      if (dropout > 0) net_->push_back(torch::nn::Dropout(dropout));
      flops_ += 2.0 * static_cast<double>(width * h);
      width = h;
    }
    net_->push_back(torch::nn::Linear(width, context.num_classes));
    flops_ += 2.0 * static_cast<double>(width * context.num_classes);
  }

  torch::nn::Module& module() override { return *net_; }

  torch::Tensor forward(const runner::Batch& batch) override {
    const torch::Tensor& x = batch.inputs;
    // Flatten only when needed: a view costs a dispatch on every step.
    if (x.dim() == 2 && x.size(1) == in_features_) return net_->forward(x);
    return net_->forward(x.reshape({x.size(0), in_features_}));
  }

  torch::Tensor loss(const torch::Tensor& output, const runner::Batch& batch) override {
    return torch::nn::functional::cross_entropy(output, batch.targets);
  }

  runner::Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    std::vector<std::int64_t> shape{batch_size};
    shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
    runner::Batch batch;
    batch.inputs = torch::randn(shape, torch::TensorOptions().device(device));
    batch.size = batch_size;
    return batch;
  }

  std::optional<double> flops_per_sample() override { return flops_; }

 private:
  torch::nn::Sequential net_;
  std::vector<std::int64_t> input_shape_;
  std::int64_t in_features_ = 0;
  double flops_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionSchema options;
  options.integers("hidden", {256, 256}, "widths of the hidden layers, input to output")
      .range(1, 1 << 20)
      .at_least(1);
  options.string("activation", "relu", "non-linearity after each hidden layer")
      .one_of({"relu", "gelu", "tanh"});
  options.number("dropout", 0.0, "dropout probability after each hidden layer").range(0.0, 0.99);
  registrar.add_model("mlp", "multi-layer perceptron classifier over flattened inputs",
                      std::move(options),
                      [](const runner::Options& o, const runner::ModelContext& ctx) {
                        return std::make_unique<Mlp>(o, ctx);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
