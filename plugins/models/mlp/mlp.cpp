// Model `mlp`: a multi-layer perceptron over flattened inputs, with
// configurable hidden sizes, activation and dropout; cross-entropy loss.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <runner/sdk.hpp>

namespace {

struct MlpOptions {
  std::vector<std::int64_t> hidden{256, 256};
  std::string activation = "relu";
  double dropout = 0.0;
};

class Mlp final : public runner::ClassificationModel {
 public:
  Mlp(const MlpOptions& options, const runner::ModelContext& context)
      : ClassificationModel(context),
        in_features_(input_features()),
        net_(register_module("net", torch::nn::Sequential())) {
    std::int64_t width = in_features_;
    for (const std::int64_t h : options.hidden) {
      net_->push_back(torch::nn::Linear(width, h));
      if (options.activation == "relu") {
        net_->push_back(torch::nn::ReLU());
      } else if (options.activation == "gelu") {
        net_->push_back(torch::nn::GELU());
      } else {
        net_->push_back(torch::nn::Tanh());
      }
      if (options.dropout > 0) net_->push_back(torch::nn::Dropout(options.dropout));
      flops_ += 2.0 * static_cast<double>(width * h);
      width = h;
    }
    net_->push_back(torch::nn::Linear(width, num_classes()));
    flops_ += 2.0 * static_cast<double>(width * num_classes());
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    // Flatten only when needed: a view costs a dispatch on every step.
    if (x.dim() == 2 && x.size(1) == in_features_) return net_->forward(x);
    return net_->forward(x.reshape({x.size(0), in_features_}));
  }

  std::optional<double> flops_per_sample() override { return flops_; }

 private:
  std::int64_t in_features_;
  torch::nn::Sequential net_;
  double flops_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<MlpOptions> options;
  options.field("hidden", &MlpOptions::hidden, "widths of the hidden layers, input to output")
      .range(1, 1 << 20)
      .items(1, 1024);
  options.field("activation", &MlpOptions::activation, "non-linearity after each hidden layer")
      .one_of({"relu", "gelu", "tanh"});
  options.field("dropout", &MlpOptions::dropout, "dropout probability after each hidden layer")
      .range(0.0, 0.99);
  registrar.add_model("mlp", "multi-layer perceptron classifier over flattened inputs", options,
                      [](const MlpOptions& o, const runner::ModelContext& ctx) {
                        return std::make_unique<Mlp>(o, ctx);
                      },
                      [](const MlpOptions&, const runner::ModelContext& ctx) {
                        runner::ClassificationModel::check_data(ctx);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
