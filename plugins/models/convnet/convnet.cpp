// Model `convnet`: a small convolutional classifier for image samples
// [channels, height, width]: two blocks of 3x3 convolution, batch norm, ReLU
// and 2x2 max-pooling, then a linear head. It is docs/plugins.md's worked
// example of a model on runner::ClassificationModel.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <runner/sdk.hpp>

#include <stdexcept>

namespace {

struct ConvNetOptions {
  std::array<std::int64_t, 2> channels{32, 64};
  bool batch_norm = true;
  double dropout = 0.0;
};

// The model's rules over the data: the data check (before any run) and the
// constructor both call it, so the rule is written once.
void check_samples(const ConvNetOptions&, const runner::ModelContext& context) {
  runner::ClassificationModel::check_data(context);
  const std::vector<std::int64_t>& shape = context.input_shape;
  if (shape.size() != 3 || shape[1] < 4 || shape[2] < 4)
    throw std::invalid_argument(
        "needs image samples [channels, height, width] of at least 4x4; set the loader's "
        "shape, e.g. shape = [3, 32, 32]");
}

class ConvNet final : public runner::ClassificationModel {
 public:
  ConvNet(const ConvNetOptions& o, const runner::ModelContext& context)
      : ClassificationModel(context) {
    check_samples(o, context);
    const std::vector<std::int64_t>& shape = input_shape();
    std::int64_t channels = shape[0], height = shape[1], width = shape[2];
    for (const std::int64_t out : o.channels) {
      features_->push_back(torch::nn::Conv2d(
          torch::nn::Conv2dOptions(channels, out, 3).padding(1).bias(!o.batch_norm)));
      if (o.batch_norm) features_->push_back(torch::nn::BatchNorm2d(out));
      features_->push_back(torch::nn::ReLU());
      features_->push_back(torch::nn::MaxPool2d(2));
      flops_ += 2.0 * static_cast<double>(channels * 9 * out * height * width);
      channels = out;
      height /= 2;
      width /= 2;
    }
    const std::int64_t flat = channels * height * width;
    if (o.dropout > 0) head_->push_back(torch::nn::Dropout(o.dropout));
    head_->push_back(torch::nn::Linear(flat, num_classes()));
    flops_ += 2.0 * static_cast<double>(flat * num_classes());
  }

  torch::Tensor forward(const torch::Tensor& images) override {
    return head_->forward(features_->forward(images).flatten(1));
  }

  std::optional<double> flops_per_sample() override { return flops_; }

 private:
  torch::nn::Sequential features_ = register_module("features", torch::nn::Sequential());
  torch::nn::Sequential head_ = register_module("head", torch::nn::Sequential());
  double flops_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<ConvNetOptions> options;
  options.field("channels", &ConvNetOptions::channels, "output channels of the two conv blocks")
      .range(1, 4096);
  options.field("batch_norm", &ConvNetOptions::batch_norm, "batch norm after each convolution");
  options.field("dropout", &ConvNetOptions::dropout, "dropout before the linear head")
      .range(0.0, 0.99);
  registrar.add_model("convnet", "two conv blocks and a linear head, for image samples", options,
                      [](const ConvNetOptions& o, const runner::ModelContext& context) {
                        return std::make_unique<ConvNet>(o, context);
                      },
                      check_samples);
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
