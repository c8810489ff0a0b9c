// The gpt2 flavour of transformer_lm, in karpathy/nanoGPT's names (model.py):
// pre-LayerNorm blocks, learned positions, a packed query/key/value
// projection, GELU with the tanh approximation, biases everywhere, and the LM
// head tied to the token embedding (registered once, as
// transformer.wte.weight; tied_parameters() names the lm_head.weight alias
// that Python state dicts hold).
// norm_op and activation_op put custom ops in place of the LayerNorms and of
// the MLP's bias + GELU; the parameters stay as they are (same names, same
// state dicts), the ops read them.
#include <ATen/ops/linear.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "transformer_lm.hpp"

namespace transformer_lm {

namespace {

namespace F = torch::nn::functional;

torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  if (p == 0 || !training) return x;
  return F::dropout(x, F::DropoutFuncOptions().p(p).training(true));
}

torch::nn::LayerNorm layer_norm(const LmConfig& c) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.width}).eps(c.norm_eps));
}

/// A Linear's parameters applied as PyTorch's F.linear applies them.
/// torch::nn::Linear's C++ forward (torch::nn::functional::linear) runs a
/// [batch, seq, in] input as matmul, then add_ of the bias, a second pass over
/// the output in forward and an extra node in backward; at::linear, which
/// F.linear calls, folds it to 2-D and adds the bias inside the GEMM (addmm),
/// as the eager reference does.
torch::Tensor project(const torch::nn::Linear& linear, const torch::Tensor& x) {
  return at::linear(x, linear->weight, linear->bias);
}

/// A LayerNorm's parameters, applied by ATen or by the norm_op.
torch::Tensor normalise(torch::nn::LayerNorm& norm, const torch::Tensor& x,
                        const LmOps& ops) {
  if (!ops.layernorm) return norm->forward(x);
  return runner_models::ops::layer_norm(*ops.layernorm, x, norm->weight, norm->bias,
                                      norm->options.eps());
}

class Attention : public torch::nn::Module {
 public:
  explicit Attention(const LmConfig& c)
      : heads_(c.heads),
        dropout_(c.dropout),
        c_attn_(register_module("c_attn", torch::nn::Linear(c.width, 3 * c.width))),
        c_proj_(register_module("c_proj", torch::nn::Linear(c.width, c.width))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const std::int64_t b = x.size(0), t = x.size(1), width = x.size(2);
    // c_attn's output is [q | k | v] along the last dimension, each split in
    // heads of width / heads.
    std::vector<torch::Tensor> qkv = project(c_attn_, x).split(width, 2);
    for (auto& y : qkv) y = y.view({b, t, heads_, width / heads_}).transpose(1, 2);
    const torch::Tensor y = at::scaled_dot_product_attention(
        qkv[0], qkv[1], qkv[2], {}, is_training() ? dropout_ : 0.0, /*is_causal=*/true);
    return maybe_dropout(project(c_proj_, y.transpose(1, 2).reshape({b, t, width})), dropout_,
                         is_training());
  }

 private:
  std::int64_t heads_;
  double dropout_;
  torch::nn::Linear c_attn_, c_proj_;
};

class Mlp : public torch::nn::Module {
 public:
  explicit Mlp(const LmConfig& c)
      : dropout_(c.dropout),
        bias_gelu_(c.ops.bias_gelu),
        c_fc_(register_module("c_fc", torch::nn::Linear(c.width, c.mlp_hidden))),
        c_proj_(register_module("c_proj", torch::nn::Linear(c.mlp_hidden, c.width))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor h =
        bias_gelu_ ? runner_models::ops::linear_gelu(*bias_gelu_, x, c_fc_->weight, c_fc_->bias, "tanh")
                   : F::gelu(project(c_fc_, x), F::GELUFuncOptions().approximate("tanh"));
    return maybe_dropout(project(c_proj_, h), dropout_, is_training());
  }

 private:
  double dropout_;
  std::optional<c10::TypedOperatorHandle<runner_models::ops::BiasGeluFn>> bias_gelu_;
  torch::nn::Linear c_fc_, c_proj_;
};

class Block : public torch::nn::Module {
 public:
  explicit Block(const LmConfig& c)
      : ops_(c.ops),
        ln_1_(register_module("ln_1", layer_norm(c))),
        attn_(register_module("attn", std::make_shared<Attention>(c))),
        ln_2_(register_module("ln_2", layer_norm(c))),
        mlp_(register_module("mlp", std::make_shared<Mlp>(c))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = x + attn_->forward(normalise(ln_1_, x, ops_));
    return x + mlp_->forward(normalise(ln_2_, x, ops_));
  }

 private:
  LmOps ops_;
  torch::nn::LayerNorm ln_1_;
  std::shared_ptr<Attention> attn_;
  torch::nn::LayerNorm ln_2_;
  std::shared_ptr<Mlp> mlp_;
};

class Gpt2 final : public LanguageModel {
 public:
  explicit Gpt2(const LmConfig& c) : LanguageModel(c) {
    auto transformer = register_module("transformer", std::make_shared<torch::nn::Module>());
    wte_ = transformer->register_module("wte", torch::nn::Embedding(c.vocab, c.width));
    wpe_ = transformer->register_module("wpe", torch::nn::Embedding(c.max_seq_len, c.width));
    auto h = transformer->register_module("h", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < c.depth; ++i) {
      blocks_.push_back(std::make_shared<Block>(c));
      h->push_back(blocks_.back());
    }
    ln_f_ = transformer->register_module("ln_f", layer_norm(c));
    initialise();
  }

  std::map<std::string, std::string> tied_parameters() override {
    return {{"lm_head.weight", "transformer.wte.weight"}};
  }

 protected:
  torch::Tensor logits(const torch::Tensor& ids) override {
    const torch::Tensor positions = torch::arange(ids.size(1), ids.options());
    torch::Tensor x = maybe_dropout(wte_->forward(ids) + wpe_->forward(positions),
                                    config().dropout, module().is_training());
    for (std::size_t i = 0; i < blocks_.size(); ++i)
      x = config().checkpoint.applies_to(static_cast<std::int64_t>(i))
              ? runner::checkpoint(blocks_[i], x)
              : blocks_[i]->forward(x);
    return at::linear(normalise(ln_f_, x, config().ops), wte_->weight);
  }

 private:
  // nanoGPT's initialisation: normal(0, 0.02) for every weight matrix and
  // embedding, zero biases, unit LayerNorm scales, and the projections back
  // into the residual stream (c_proj) at 0.02 / sqrt(2 x depth).
  void initialise() {
    torch::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config().depth));
    for (auto& p : module().named_parameters()) {
      const std::string& name = p.key();
      if (name.ends_with(".bias"))
        torch::nn::init::zeros_(p.value());
      else if (p.value().dim() == 1)
        torch::nn::init::ones_(p.value());
      else if (name.ends_with("c_proj.weight"))
        torch::nn::init::normal_(p.value(), 0.0, residual_std);
      else
        torch::nn::init::normal_(p.value(), 0.0, 0.02);
    }
  }

  torch::nn::Embedding wte_{nullptr}, wpe_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::LayerNorm ln_f_{nullptr};
};

}  // namespace

std::unique_ptr<runner::Model> make_gpt2(const LmConfig& config) {
  return std::make_unique<Gpt2>(config);
}

}  // namespace transformer_lm
