// Model `resnet`: the residual networks of He et al. (2015) in torchvision's
// layout: depths 18 and 34 of basic blocks, 50, 101 and 152 of bottleneck
// blocks (the stride on the bottleneck's 3x3 convolution, "ResNet v1.5").
// Parameter and buffer names and shapes are torchvision's (conv1.weight,
// layer1.0.bn1.running_mean, layer2.0.downsample.0.weight, fc.bias, ...), so
// a torchvision state dict loads by name. The "cifar" stem replaces the 7x7
// stride-2 convolution and the max-pool with one 3x3 stride-1 convolution,
// as CIFAR ResNet recipes do; its conv1.weight is [64, 3, 3, 3].
// checkpoint = "blocks" recomputes every residual block in the backward pass
// (runner/checkpoint.hpp; the batch norms' running statistics are updated
// once per step, as without it).
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <runner/checkpoint.hpp>
#include <runner/sdk.hpp>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace F = torch::nn::functional;

struct ResNetOptions {
  std::int64_t depth = 18;
  std::int64_t num_classes = 0;  // 0: the loader's
  bool zero_init_residual = false;
  std::string stem = "imagenet";
  std::string checkpoint = "none";
  std::int64_t checkpoint_every = 2;
};

/// Counts forward FLOPs as torch.utils.flop_counter does: 2 per
/// multiply-accumulate of convolutions and matrix products, nothing for
/// normalisation, activations, pooling or additions.
class FlopCount {
 public:
  FlopCount(std::int64_t height, std::int64_t width) : height_(height), width_(width) {}

  /// A k x k convolution with this stride and padding; moves to its output size.
  void conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
            std::int64_t padding) {
    height_ = (height_ + 2 * padding - k) / stride + 1;
    width_ = (width_ + 2 * padding - k) / stride + 1;
    flops_ += 2.0 * static_cast<double>(in * k * k * out) * static_cast<double>(height_ * width_);
  }
  /// A pooling window that changes the size but costs no FLOPs.
  void pool(std::int64_t k, std::int64_t stride, std::int64_t padding) {
    height_ = (height_ + 2 * padding - k) / stride + 1;
    width_ = (width_ + 2 * padding - k) / stride + 1;
  }
  void linear(std::int64_t in, std::int64_t out) {
    flops_ += 2.0 * static_cast<double>(in * out);
  }
  [[nodiscard]] std::int64_t height() const { return height_; }
  [[nodiscard]] std::int64_t width() const { return width_; }
  [[nodiscard]] double flops() const { return flops_; }

 private:
  std::int64_t height_, width_;
  double flops_ = 0;
};

torch::nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

/// A residual block: basic (two 3x3 convolutions) or bottleneck (1x1, 3x3
/// with the stride, 1x1 to 4x the width), with a 1x1 projection shortcut
/// ("downsample") where the shape changes.
class Block : public torch::nn::Module {
 public:
  Block(bool bottleneck, std::int64_t in, std::int64_t planes, std::int64_t stride,
        FlopCount& flops) {
    const std::int64_t out = planes * expansion(bottleneck);
    const std::int64_t in_h = flops.height(), in_w = flops.width();
    if (bottleneck) {
      convs_ = {register_module("conv1", conv(in, planes, 1, 1)),
                register_module("conv2", conv(planes, planes, 3, stride)),
                register_module("conv3", conv(planes, out, 1, 1))};
      norms_ = {register_module("bn1", torch::nn::BatchNorm2d(planes)),
                register_module("bn2", torch::nn::BatchNorm2d(planes)),
                register_module("bn3", torch::nn::BatchNorm2d(out))};
      flops.conv(in, planes, 1, 1, 0);
      flops.conv(planes, planes, 3, stride, 1);
      flops.conv(planes, out, 1, 1, 0);
    } else {
      convs_ = {register_module("conv1", conv(in, planes, 3, stride)),
                register_module("conv2", conv(planes, planes, 3, 1))};
      norms_ = {register_module("bn1", torch::nn::BatchNorm2d(planes)),
                register_module("bn2", torch::nn::BatchNorm2d(planes))};
      flops.conv(in, planes, 3, stride, 1);
      flops.conv(planes, planes, 3, 1, 1);
    }
    if (stride != 1 || in != out) {
      downsample_ = register_module(
          "downsample", torch::nn::Sequential(conv(in, out, 1, stride), torch::nn::BatchNorm2d(out)));
      FlopCount shortcut(in_h, in_w);
      shortcut.conv(in, out, 1, stride, 0);
      shortcut_flops_ = shortcut.flops();
    }
  }

  static std::int64_t expansion(bool bottleneck) { return bottleneck ? 4 : 1; }

  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = x;
    for (std::size_t i = 0; i < convs_.size(); ++i) {
      y = norms_[i]->forward(convs_[i]->forward(y));
      if (i + 1 < convs_.size()) y = F::relu(y);
    }
    const torch::Tensor identity = downsample_ ? downsample_->forward(x) : x;
    return F::relu(y + identity);
  }

  /// The last batch norm of the residual branch (zero_init_residual sets its
  /// scale to 0, so each block starts as the identity).
  torch::nn::BatchNorm2d& last_norm() { return norms_.back(); }
  [[nodiscard]] double shortcut_flops() const { return shortcut_flops_; }

 private:
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::BatchNorm2d> norms_;
  torch::nn::Sequential downsample_{nullptr};
  double shortcut_flops_ = 0;
};

struct Layout {
  bool bottleneck;
  std::array<std::int64_t, 4> blocks;
};

Layout layout_of(std::int64_t depth) {
  switch (depth) {
    case 18: return {false, {2, 2, 2, 2}};
    case 34: return {false, {3, 4, 6, 3}};
    case 50: return {true, {3, 4, 6, 3}};
    case 101: return {true, {3, 4, 23, 3}};
    case 152: return {true, {3, 8, 36, 3}};
    default:
      // The option's choices are checked by the host; this is for direct callers.
      throw runner::OptionError("depth", "depth must be 18, 34, 50, 101 or 152, not " +
                                             std::to_string(depth));
  }
}

/// The context the model is built for: the head's classes, checked against
/// the loader's, and RGB image samples. The model's data check and its
/// constructor both call it.
runner::ModelContext checked_context(const ResNetOptions& o, runner::ModelContext context) {
  context = runner::ClassificationModel::with_classes(std::move(context), o.num_classes);
  runner::ClassificationModel::check_data(context);
  const std::vector<std::int64_t>& shape = context.input_shape;
  if (shape.size() != 3 || shape[0] != 3)
    throw std::invalid_argument(
        "needs RGB image samples [3, height, width]; set the loader's shape, e.g. shape = "
        "[3, 32, 32]");
  return context;
}

class ResNet final : public runner::ClassificationModel {
 public:
  ResNet(const ResNetOptions& o, const runner::ModelContext& context)
      : ClassificationModel(checked_context(o, context)),
        cifar_(o.stem == "cifar"),
        checkpoint_{o.checkpoint, o.checkpoint_every} {
    const Layout layout = layout_of(o.depth);
    const std::vector<std::int64_t>& shape = input_shape();
    FlopCount flops(shape[1], shape[2]);
    if (cifar_) {
      conv1_ = register_module("conv1", conv(3, 64, 3, 1));
      flops.conv(3, 64, 3, 1, 1);
    } else {
      conv1_ = register_module("conv1", conv(3, 64, 7, 2));
      flops.conv(3, 64, 7, 2, 3);
      flops.pool(3, 2, 1);
    }
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
    std::int64_t channels = 64;
    const std::array<std::int64_t, 4> planes{64, 128, 256, 512};
    for (std::size_t stage = 0; stage < 4; ++stage) {
      auto list = register_module("layer" + std::to_string(stage + 1), torch::nn::ModuleList());
      for (std::int64_t b = 0; b < layout.blocks[stage]; ++b) {
        const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        auto block = std::make_shared<Block>(layout.bottleneck, channels, planes[stage], stride,
                                             flops);
        flops_ += block->shortcut_flops();
        list->push_back(block);
        blocks_.push_back(block);
        channels = planes[stage] * Block::expansion(layout.bottleneck);
      }
    }
    fc_ = register_module("fc", torch::nn::Linear(channels, num_classes()));
    flops.linear(channels, num_classes());
    flops_ += flops.flops();
    initialise(o.zero_init_residual);
  }

  torch::Tensor forward(const torch::Tensor& images) override {
    torch::Tensor x = F::relu(bn1_->forward(conv1_->forward(images)));
    if (!cifar_) x = F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      x = checkpoint_.applies_to(static_cast<std::int64_t>(i)) ? runner::checkpoint(blocks_[i], x)
                                                                : blocks_[i]->forward(x);
    x = F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions(1)).flatten(1);
    return fc_->forward(x);
  }

  std::optional<double> flops_per_sample() override { return flops_; }

 private:
  // torchvision's initialisation: He normal (fan out) for convolutions,
  // scale 1 and shift 0 for batch norms, LibTorch's (= PyTorch's) default
  // for the linear head.
  void initialise(bool zero_init_residual) {
    torch::NoGradGuard no_grad;
    for (auto& m : module().modules(/*include_self=*/false)) {
      if (auto* c = m->as<torch::nn::Conv2d>()) {
        torch::nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
      } else if (auto* n = m->as<torch::nn::BatchNorm2d>()) {
        torch::nn::init::ones_(n->weight);
        torch::nn::init::zeros_(n->bias);
      }
    }
    if (zero_init_residual)
      for (const auto& block : blocks_) torch::nn::init::zeros_(block->last_norm()->weight);
  }

  bool cifar_;
  runner::CheckpointPolicy checkpoint_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::Linear fc_{nullptr};
  double flops_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<ResNetOptions> options;
  options.field("depth", &ResNetOptions::depth, "layers: 18, 34 (basic blocks), 50, 101, 152 (bottleneck)")
      .one_of_integers({18, 34, 50, 101, 152});
  options.field("num_classes", &ResNetOptions::num_classes,
                "outputs of the head; 0 = the loader's classes (1000 for torchvision's ImageNet weights)")
      .range(0, 1 << 20);
  options.field("zero_init_residual", &ResNetOptions::zero_init_residual,
                "start each block's last batch-norm scale at 0 (each block the identity)");
  options.field("stem", &ResNetOptions::stem,
                "imagenet: 7x7 stride-2 convolution and max-pool; cifar: one 3x3 stride-1 convolution")
      .one_of({"imagenet", "cifar"});
  runner::add_checkpoint_options(options, &ResNetOptions::checkpoint,
                                 &ResNetOptions::checkpoint_every, "residual block");
  registrar.add_model("resnet", "ResNet 18/34/50/101/152 in torchvision's layout", options,
                      [](const ResNetOptions& o, const runner::ModelContext& context) {
                        return std::make_unique<ResNet>(o, context);
                      },
                      [](const ResNetOptions& o, const runner::ModelContext& context) {
                        (void)checked_context(o, context);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
