// Model `vit`: the Vision Transformer of Dosovitskiy et al. (2020) in
// torchvision's layout (torchvision.models.VisionTransformer): a patch
// embedding by a convolution whose kernel and stride are the patch size, a
// learned class token and position embedding, pre-norm encoder blocks
// (LayerNorm, multi-head self-attention, residual; LayerNorm, MLP with exact
// GELU, residual), a final LayerNorm and a linear head on the class token.
// Parameter names and shapes are torchvision's (conv_proj.weight,
// class_token, encoder.pos_embedding,
// encoder.layers.encoder_layer_0.self_attention.in_proj_weight, ...,
// encoder.layers.encoder_layer_0.mlp.3.bias, encoder.ln.weight,
// heads.head.weight), so a torchvision state dict loads by name.
// checkpoint = "blocks" recomputes every encoder layer in the backward pass
// (runner/checkpoint.hpp; dropout draws the same masks both times).
// norm_op and activation_op put custom ops (runner::layernorm's and
// runner::bias_gelu's schemas) in place of every LayerNorm and of the MLP's
// bias + exact GELU; the parameters and their names stay as they are.
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <runner/checkpoint.hpp>
#include <runner/sdk.hpp>

#include "../common/custom_ops.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

/// A Linear's parameters applied as PyTorch's F.linear applies them.
/// torch::nn::Linear's C++ forward runs a [batch, tokens, in] input as matmul,
/// then add_ of the bias (a second pass over the output, an extra node in
/// backward); at::linear, which F.linear calls, folds it to 2-D and adds the
/// bias inside the GEMM (addmm), as torchvision's layers do.
torch::Tensor project(const torch::nn::Linear& linear, const torch::Tensor& x) {
  return at::linear(x, linear->weight, linear->bias);
}

struct VitOptions {
  std::string config = "b";
  std::int64_t patch_size = 16;
  std::int64_t image_size = 0;   // 0: the loader's
  std::int64_t num_classes = 0;  // 0: the loader's
  double dropout = 0.0;
  double attention_dropout = 0.0;
  std::string checkpoint = "none";
  std::int64_t checkpoint_every = 2;
  std::string norm_op;        // "": ATen's LayerNorm
  std::string activation_op;  // "": ATen's GELU
};

/// The custom ops the options name, looked up and checked (empty: ATen's path).
struct VitOps {
  std::optional<c10::TypedOperatorHandle<runner_models::ops::LayerNormFn>> layernorm;
  std::optional<c10::TypedOperatorHandle<runner_models::ops::BiasGeluFn>> bias_gelu;
};

/// A LayerNorm's parameters, applied by ATen or by the norm_op.
torch::Tensor normalise(torch::nn::LayerNorm& norm, const torch::Tensor& x, const VitOps& ops) {
  if (!ops.layernorm) return norm->forward(x);
  return runner_models::ops::layer_norm(*ops.layernorm, x, norm->weight, norm->bias,
                                      norm->options.eps());
}

/// The sizes of the named configurations (ViT paper, table 1; "ti" from DeiT).
struct Size {
  std::int64_t hidden, layers, heads, mlp;
};

Size size_of(const std::string& config) {
  if (config == "ti") return {192, 12, 3, 768};
  if (config == "s") return {384, 12, 6, 1536};
  if (config == "b") return {768, 12, 12, 3072};
  if (config == "l") return {1024, 24, 16, 4096};
  // The option's choices are checked by the host; this is for direct callers.
  throw runner::OptionError("config",
                            "config must be \"ti\", \"s\", \"b\" or \"l\", not \"" + config + "\"");
}

// torch.nn.init.trunc_normal_ (absent from LibTorch): a normal(mean, std)
// restricted to [low, high] (absolute bounds, as Python's), drawn by
// inverting the normal CDF over the uniform image of [low, high].
void trunc_normal_(torch::Tensor& t, double mean, double std, double low, double high) {
  auto cdf = [](double z) { return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))); };
  const double lo = cdf((low - mean) / std), hi = cdf((high - mean) / std);
  t.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(std * std::sqrt(2.0)).add_(mean);
  t.clamp_(low, high);
}

/// torch.nn.MultiheadAttention's parameters (batch first, one packed
/// in-projection for query, key and value), computed by
/// scaled_dot_product_attention as its need_weights=False path is.
class SelfAttention : public torch::nn::Module {
 public:
  SelfAttention(std::int64_t hidden, std::int64_t heads, double dropout)
      : heads_(heads), dropout_(dropout) {
    in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({3 * hidden, hidden}));
    in_proj_bias_ = register_parameter("in_proj_bias", torch::empty({3 * hidden}));
    out_proj_ = register_module("out_proj", torch::nn::Linear(hidden, hidden));
    torch::NoGradGuard no_grad;
    torch::nn::init::xavier_uniform_(in_proj_weight_);
    torch::nn::init::zeros_(in_proj_bias_);
    torch::nn::init::zeros_(out_proj_->bias);  // the weight keeps Linear's default
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const std::int64_t n = x.size(0), tokens = x.size(1), hidden = x.size(2);
    // [n, tokens, 3 * hidden] -> 3 x [n, heads, tokens, head_dim]
    const std::vector<torch::Tensor> qkv =
        at::linear(x, in_proj_weight_, in_proj_bias_)
            .view({n, tokens, 3, heads_, hidden / heads_})
            .permute({2, 0, 3, 1, 4})
            .unbind(0);
    const torch::Tensor y = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {},
                                                             is_training() ? dropout_ : 0.0);
    return project(out_proj_, y.transpose(1, 2).reshape({n, tokens, hidden}));
  }

 private:
  std::int64_t heads_;
  double dropout_;
  torch::Tensor in_proj_weight_, in_proj_bias_;
  torch::nn::Linear out_proj_{nullptr};
};

/// One pre-norm encoder block (torchvision's EncoderBlock).
class EncoderBlock : public torch::nn::Module {
 public:
  EncoderBlock(const Size& s, double dropout, double attention_dropout, const VitOps& ops)
      : ops_(ops) {
    ln_1_ = register_module("ln_1", layer_norm(s.hidden));
    attention_ = register_module("self_attention",
                                 std::make_shared<SelfAttention>(s.hidden, s.heads, attention_dropout));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
    ln_2_ = register_module("ln_2", layer_norm(s.hidden));
    // Indices as torchvision's MLP: 0 linear, 1 GELU, 2 dropout, 3 linear, 4 dropout.
    first_ = torch::nn::Linear(s.hidden, s.mlp);
    second_ = torch::nn::Linear(s.mlp, s.hidden);
    mlp_dropouts_ = {torch::nn::Dropout(dropout), torch::nn::Dropout(dropout)};
    mlp_ = register_module("mlp", torch::nn::Sequential(first_, torch::nn::GELU(), mlp_dropouts_[0],
                                                        second_, mlp_dropouts_[1]));
    torch::NoGradGuard no_grad;
    for (const auto& linear : {first_, second_}) {
      torch::nn::init::xavier_uniform_(linear->weight);
      torch::nn::init::normal_(linear->bias, 0.0, 1e-6);
    }
  }

  static torch::nn::LayerNorm layer_norm(std::int64_t hidden) {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden}).eps(1e-6));
  }

  torch::Tensor forward(const torch::Tensor& input) {
    const torch::Tensor x =
        dropout_->forward(attention_->forward(normalise(ln_1_, input, ops_))) + input;
    return x + mlp(normalise(ln_2_, x, ops_));
  }

 private:
  // mlp.0 to mlp.4 one by one rather than through mlp_'s forward, so that both
  // linear layers are project()'s at::linear.
  torch::Tensor mlp(const torch::Tensor& x) {
    // mlp.0 and mlp.1 (exact GELU, as torchvision's), in one op when asked.
    const torch::Tensor h =
        ops_.bias_gelu
            ? runner_models::ops::linear_gelu(*ops_.bias_gelu, x, first_->weight, first_->bias,
                                              "none")
            : at::gelu(project(first_, x));
    return mlp_dropouts_[1]->forward(project(second_, mlp_dropouts_[0]->forward(h)));
  }

  VitOps ops_;
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  std::shared_ptr<SelfAttention> attention_;
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Sequential mlp_{nullptr};
  torch::nn::Linear first_{nullptr}, second_{nullptr};  // mlp.0, mlp.3
  std::array<torch::nn::Dropout, 2> mlp_dropouts_{nullptr, nullptr};  // mlp.2, mlp.4
};

/// The position embedding, the blocks and the final norm (torchvision's Encoder).
class Encoder : public torch::nn::Module {
 public:
  Encoder(const Size& s, std::int64_t tokens, double dropout, double attention_dropout,
          runner::CheckpointPolicy checkpoint, const VitOps& ops)
      : checkpoint_(std::move(checkpoint)), ops_(ops) {
    pos_embedding_ = register_parameter("pos_embedding", torch::empty({1, tokens, s.hidden}));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
    auto layers = register_module("layers", std::make_shared<torch::nn::Module>());
    for (std::int64_t i = 0; i < s.layers; ++i)
      blocks_.push_back(layers->register_module("encoder_layer_" + std::to_string(i),
                                                std::make_shared<EncoderBlock>(
                                                    s, dropout, attention_dropout, ops)));
    ln_ = register_module("ln", EncoderBlock::layer_norm(s.hidden));
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(pos_embedding_, 0.0, 0.02);  // as BERT
  }

  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor x = dropout_->forward(tokens + pos_embedding_);
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      x = checkpoint_.applies_to(static_cast<std::int64_t>(i)) ? runner::checkpoint(blocks_[i], x)
                                                                : blocks_[i]->forward(x);
    return normalise(ln_, x, ops_);
  }

 private:
  runner::CheckpointPolicy checkpoint_;
  VitOps ops_;
  torch::Tensor pos_embedding_;
  torch::nn::Dropout dropout_{nullptr};
  std::vector<std::shared_ptr<EncoderBlock>> blocks_;
  torch::nn::LayerNorm ln_{nullptr};
};

void check_patch(std::int64_t side, std::int64_t patch_size) {
  if (side % patch_size != 0)
    throw runner::OptionError("patch_size", "image size " + std::to_string(side) +
                                                " is not divisible by patch_size = " +
                                                std::to_string(patch_size) +
                                                "; choose a patch size that divides it or "
                                                "resize the loader's images");
}

/// The rules over the options alone: a given image_size fits whole patches.
void check_options(const VitOptions& o) {
  if (o.image_size != 0) check_patch(o.image_size, o.patch_size);
}

/// The side of the loader's square RGB images, checked against the options.
std::int64_t image_side(const std::vector<std::int64_t>& shape, const VitOptions& o) {
  if (shape.size() != 3 || shape[0] != 3)
    throw std::invalid_argument(
        "needs RGB image samples [3, height, width]; set the loader's shape, e.g. shape = "
        "[3, 224, 224]");
  const std::int64_t height = shape[1], width = shape[2];
  if (height != width)
    throw std::invalid_argument("needs square images; the loader's are " +
                                std::to_string(height) + "x" + std::to_string(width) +
                                " (height x width): set the loader's shape to [3, S, S]");
  if (o.image_size != 0 && o.image_size != height)
    throw runner::OptionError(
        "image_size",
        "image_size = " + std::to_string(o.image_size) + " differs from the loader's " +
            std::to_string(height) + "x" + std::to_string(height) +
            " images; leave it at 0 (the loader's) or set the loader's shape to [3, " +
            std::to_string(o.image_size) + ", " + std::to_string(o.image_size) + "]");
  check_patch(height, o.patch_size);
  return height;
}

/// The ops the options name, looked up and checked against the run.
VitOps find_ops(const VitOptions& o, const runner::ModelContext& context) {
  namespace ops = runner_models::ops;
  return {ops::find_op("norm_op", o.norm_op, ops::kLayerNorm, context),
          ops::find_op("activation_op", o.activation_op, ops::kBiasGelu, context)};
}

/// What the constructor checks, without building: the model's data check.
void check_loader_data(const VitOptions& o, const runner::ModelContext& context) {
  const runner::ModelContext classes =
      runner::ClassificationModel::with_classes(context, o.num_classes);
  runner::ClassificationModel::check_data(classes);
  (void)image_side(classes.input_shape, o);
  (void)find_ops(o, context);
}

class VisionTransformer final : public runner::ClassificationModel {
 public:
  VisionTransformer(const VitOptions& o, const runner::ModelContext& context)
      : ClassificationModel(with_classes(context, o.num_classes)),
        size_(size_of(o.config)),
        image_(image_side(input_shape(), o)),
        patch_(o.patch_size),
        ops_(find_ops(o, context)) {
    const std::int64_t d = size_.hidden, patches = (image_ / patch_) * (image_ / patch_);
    const std::int64_t tokens = patches + 1;
    // Registration order as torchvision's state dict: class_token first.
    class_token_ = module().register_parameter("class_token", torch::zeros({1, 1, d}));
    conv_proj_ = register_module(
        "conv_proj", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, d, patch_).stride(patch_)));
    const runner::CheckpointPolicy checkpoint{o.checkpoint, o.checkpoint_every};
    encoder_ = register_module("encoder", std::make_shared<Encoder>(size_, tokens, o.dropout,
                                                                    o.attention_dropout, checkpoint,
                                                                    ops_));
    auto heads = register_module("heads", std::make_shared<torch::nn::Module>());
    head_ = heads->register_module("head", torch::nn::Linear(d, num_classes()));
    {
      torch::NoGradGuard no_grad;
      const double fan_in = 3.0 * static_cast<double>(patch_ * patch_);
      trunc_normal_(conv_proj_->weight, 0.0, std::sqrt(1.0 / fan_in), -2.0, 2.0);
      torch::nn::init::zeros_(conv_proj_->bias);
      torch::nn::init::zeros_(head_->weight);
      torch::nn::init::zeros_(head_->bias);
    }
    // Forward FLOPs as torch.utils.flop_counter counts them: 2 per
    // multiply-accumulate of the patch convolution, every linear layer and
    // attention's two batched products (Q K^T and the weighted sum of V).
    const auto t = static_cast<double>(tokens), h = static_cast<double>(d);
    const double block = 2 * t * h * 3 * h             // packed q, k, v projection
                         + 2 * 2 * t * t * h             // Q K^T, then scores x V
                         + 2 * t * h * h                 // out_proj
                         + 2 * 2 * t * h * static_cast<double>(size_.mlp);  // mlp.0, mlp.3
    flops_ = 2.0 * 3 * static_cast<double>(patch_ * patch_) * h * static_cast<double>(patches) +
             static_cast<double>(size_.layers) * block + 2 * h * static_cast<double>(num_classes());
  }

  torch::Tensor forward(const torch::Tensor& images) override {
    if (images.dim() != 4 || images.size(2) != image_ || images.size(3) != image_)
      throw std::invalid_argument("expected images [batch, 3, " + std::to_string(image_) + ", " +
                                  std::to_string(image_) + "], got " +
                                  c10::str(images.sizes()));
    const std::int64_t n = images.size(0);
    // [n, 3, H, W] -> [n, hidden, H/p, W/p] -> [n, patches, hidden]
    const torch::Tensor patches = conv_proj_->forward(images).flatten(2).transpose(1, 2);
    torch::Tensor x = torch::cat({class_token_.expand({n, -1, -1}), patches}, 1);
    x = encoder_->forward(x);
    return project(head_, x.select(1, 0));
  }

  std::optional<double> flops_per_sample() override { return flops_; }

  /// The custom ops it calls, if any: "norm_op" / "activation_op" -> schema, registration.
  std::map<std::string, std::string> provenance() override {
    std::map<std::string, std::string> out;
    if (ops_.layernorm) out["norm_op"] = runner_models::ops::describe(*ops_.layernorm);
    if (ops_.bias_gelu) out["activation_op"] = runner_models::ops::describe(*ops_.bias_gelu);
    return out;
  }

 private:
  Size size_;
  std::int64_t image_, patch_;
  VitOps ops_;
  torch::Tensor class_token_;
  torch::nn::Conv2d conv_proj_{nullptr};
  std::shared_ptr<Encoder> encoder_;
  torch::nn::Linear head_{nullptr};
  double flops_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<VitOptions> options;
  options.field("config", &VitOptions::config,
                "size: ti (192 wide, 12 deep, 3 heads), s (384, 12, 6), b (768, 12, 12), "
                "l (1024, 24, 16)")
      .one_of({"ti", "s", "b", "l"});
  options.field("patch_size", &VitOptions::patch_size,
                "side of the square patches; must divide the image side")
      .range(1, 4096);
  options.field("image_size", &VitOptions::image_size,
                "side of the square images; 0 = the loader's (any other value must equal it)")
      .range(0, 1 << 16);
  options.field("num_classes", &VitOptions::num_classes,
                "outputs of the head; 0 = the loader's classes (1000 for torchvision's ImageNet "
                "weights)")
      .range(0, 1 << 20);
  options.field("dropout", &VitOptions::dropout,
                "dropout after the position embedding, the attention and in the MLP (training only)")
      .range(0.0, 1.0);
  options.field("attention_dropout", &VitOptions::attention_dropout,
                "dropout on the attention weights (training only)")
      .range(0.0, 1.0);
  runner::add_checkpoint_options(options, &VitOptions::checkpoint, &VitOptions::checkpoint_every,
                                 "encoder layer");
  options.check(check_options);
  options
      .field("norm_op", &VitOptions::norm_op,
             "custom op for every LayerNorm, \"namespace::name\" from a loaded kernel plugin with "
             "runner::layernorm's schema; \"\" = ATen's")
      .added_later_with_default();
  options
      .field("activation_op", &VitOptions::activation_op,
             "custom op for the MLP's bias + exact GELU, runner::bias_gelu's schema, fed mlp.0's "
             "bias; \"\" = ATen's")
      .added_later_with_default();
  registrar.add_model("vit", "Vision Transformer ti/s/b/l in torchvision's layout", options,
                      [](const VitOptions& o, const runner::ModelContext& context) {
                        return std::make_unique<VisionTransformer>(o, context);
                      },
                      check_loader_data);
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
