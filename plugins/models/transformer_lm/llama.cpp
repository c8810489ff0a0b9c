// The llama flavour of transformer_lm, in Hugging Face transformers' names
// (LlamaForCausalLM): RMSNorm (a weight, no bias), rotary position
// embeddings in Hugging Face's convention (rotate_half pairs dimension i with
// i + head_dim / 2, not interleaved neighbours), a SwiGLU MLP, no biases,
// grouped-query attention (each key/value head repeated to heads / kv_heads
// consecutive query heads) and an untied LM head.
//
// The rotary cos/sin tables are not state: Python state dicts do not hold
// them (non-persistent buffers there), so they are plain members, not
// registered buffers, computed on the CPU once and copied to the input's
// device on first use there.
//
// norm_op puts a custom op (runner::rmsnorm's schema) in place of every
// RMSNorm, reading the same weight. Hugging Face's LlamaRMSNorm normalises in
// float32, casts back to the input's dtype, then multiplies by the weight; an
// rmsnorm op computes x / rms(x) * weight in one pass. In float32 the two are
// the same function; in bfloat16 or float16 the op rounds once where Hugging
// Face rounds the normalised value before the product (about one unit in the
// last place of difference).
#include <ATen/ops/scaled_dot_product_attention.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <optional>
#include <vector>

#include "transformer_lm.hpp"

namespace transformer_lm {

namespace {

namespace F = torch::nn::functional;

torch::nn::Linear linear(std::int64_t in, std::int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

/// x / rms(x) * weight, normalised in float32 as Hugging Face's LlamaRMSNorm.
class RmsNorm : public torch::nn::Module {
 public:
  explicit RmsNorm(const LmConfig& c)
      : eps_(c.norm_eps),
        op_(c.ops.rmsnorm),
        weight_(register_parameter("weight", torch::ones({c.width}))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    if (op_) return runner_models::ops::rms_norm(*op_, x, weight_, eps_);
    const torch::Tensor x32 = x.to(torch::kFloat);
    const torch::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + eps_);
    return weight_ * normed.to(x.scalar_type());
  }

 private:
  double eps_;
  std::optional<c10::TypedOperatorHandle<runner_models::ops::RmsNormFn>> op_;
  torch::Tensor weight_;
};

/// [x1, x2] -> [-x2, x1] over the two halves of the last dimension.
torch::Tensor rotate_half(const torch::Tensor& x) {
  const std::vector<torch::Tensor> halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

class Attention : public torch::nn::Module {
 public:
  explicit Attention(const LmConfig& c)
      : heads_(c.heads),
        kv_heads_(c.kv_heads),
        head_dim_(c.head_dim()),
        dropout_(c.dropout),
        q_proj_(register_module("q_proj", linear(c.width, c.heads * head_dim_))),
        k_proj_(register_module("k_proj", linear(c.width, c.kv_heads * head_dim_))),
        v_proj_(register_module("v_proj", linear(c.width, c.kv_heads * head_dim_))),
        o_proj_(register_module("o_proj", linear(c.heads * head_dim_, c.width))) {}

  /// x [batch, seq, width]; cos and sin [seq, head_dim] in x's dtype.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos,
                        const torch::Tensor& sin) {
    const std::int64_t b = x.size(0), t = x.size(1);
    auto heads = [&](const torch::Tensor& y, std::int64_t n) {
      return y.view({b, t, n, head_dim_}).transpose(1, 2);
    };
    torch::Tensor q = heads(q_proj_->forward(x), heads_);
    torch::Tensor k = heads(k_proj_->forward(x), kv_heads_);
    torch::Tensor v = heads(v_proj_->forward(x), kv_heads_);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    if (kv_heads_ != heads_) {
      k = k.repeat_interleave(heads_ / kv_heads_, 1);
      v = v.repeat_interleave(heads_ / kv_heads_, 1);
    }
    const torch::Tensor y = at::scaled_dot_product_attention(
        q, k, v, {}, is_training() ? dropout_ : 0.0, /*is_causal=*/true);
    return o_proj_->forward(y.transpose(1, 2).reshape({b, t, heads_ * head_dim_}));
  }

 private:
  std::int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  torch::nn::Linear q_proj_, k_proj_, v_proj_, o_proj_;
};

class Mlp : public torch::nn::Module {
 public:
  explicit Mlp(const LmConfig& c)
      : gate_proj_(register_module("gate_proj", linear(c.width, c.mlp_hidden))),
        up_proj_(register_module("up_proj", linear(c.width, c.mlp_hidden))),
        down_proj_(register_module("down_proj", linear(c.mlp_hidden, c.width))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    return down_proj_->forward(F::silu(gate_proj_->forward(x)) * up_proj_->forward(x));
  }

 private:
  torch::nn::Linear gate_proj_, up_proj_, down_proj_;
};

class Layer : public torch::nn::Module {
 public:
  explicit Layer(const LmConfig& c)
      : self_attn_(register_module("self_attn", std::make_shared<Attention>(c))),
        mlp_(register_module("mlp", std::make_shared<Mlp>(c))),
        input_layernorm_(register_module("input_layernorm", std::make_shared<RmsNorm>(c))),
        post_attention_layernorm_(
            register_module("post_attention_layernorm", std::make_shared<RmsNorm>(c))) {}

  torch::Tensor forward(torch::Tensor x, const torch::Tensor& cos, const torch::Tensor& sin) {
    x = x + self_attn_->forward(input_layernorm_->forward(x), cos, sin);
    return x + mlp_->forward(post_attention_layernorm_->forward(x));
  }

 private:
  std::shared_ptr<Attention> self_attn_;
  std::shared_ptr<Mlp> mlp_;
  std::shared_ptr<RmsNorm> input_layernorm_, post_attention_layernorm_;
};

class Llama final : public LanguageModel {
 public:
  explicit Llama(const LmConfig& c) : LanguageModel(c) {
    auto model = register_module("model", std::make_shared<torch::nn::Module>());
    embed_tokens_ = model->register_module("embed_tokens", torch::nn::Embedding(c.vocab, c.width));
    auto layers = model->register_module("layers", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < c.depth; ++i) {
      layers_.push_back(std::make_shared<Layer>(c));
      layers->push_back(layers_.back());
    }
    norm_ = model->register_module("norm", std::make_shared<RmsNorm>(c));
    lm_head_ = register_module("lm_head", linear(c.width, c.vocab));
    initialise();

    // angle(position p, pair i) = p / theta^(2i / head_dim), each frequency
    // used for both halves of a head.
    const std::int64_t head_dim = c.head_dim();
    const torch::Tensor inv_freq =
        1.0 / torch::pow(c.rope_theta, torch::arange(0, head_dim, 2, torch::kFloat) /
                                           static_cast<double>(head_dim));
    torch::Tensor angles = torch::outer(torch::arange(c.max_seq_len, torch::kFloat), inv_freq);
    angles = torch::cat({angles, angles}, -1);
    cos_cpu_ = angles.cos();
    sin_cpu_ = angles.sin();
  }

 protected:
  torch::Tensor logits(const torch::Tensor& ids) override {
    torch::Tensor x = embed_tokens_->forward(ids);
    if (!cos_.defined() || cos_.device() != x.device() || cos_.scalar_type() != x.scalar_type()) {
      cos_ = cos_cpu_.to(x.device(), x.scalar_type());
      sin_ = sin_cpu_.to(x.device(), x.scalar_type());
    }
    const std::int64_t t = ids.size(1);
    const torch::Tensor cos = cos_.narrow(0, 0, t), sin = sin_.narrow(0, 0, t);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      const std::shared_ptr<Layer>& layer = layers_[i];
      if (config().checkpoint.applies_to(static_cast<std::int64_t>(i)))
        // The tables are constants (no grad): captured by value with the layer.
        x = runner::checkpoint(
            *layer, [layer, cos, sin](const torch::Tensor& h) { return layer->forward(h, cos, sin); },
            x);
      else
        x = layer->forward(x, cos, sin);
    }
    return lm_head_->forward(norm_->forward(x));
  }

 private:
  // Hugging Face's initialisation for Llama: normal(0, 0.02) for every
  // weight matrix and embedding (initializer_range), unit RMSNorm weights.
  void initialise() {
    torch::NoGradGuard no_grad;
    for (auto& p : module().parameters())
      if (p.dim() == 2) torch::nn::init::normal_(p, 0.0, 0.02);
  }

  torch::nn::Embedding embed_tokens_{nullptr};
  std::vector<std::shared_ptr<Layer>> layers_;
  std::shared_ptr<RmsNorm> norm_;
  torch::nn::Linear lm_head_{nullptr};
  torch::Tensor cos_cpu_, sin_cpu_;  // [max_seq_len, head_dim], float32
  torch::Tensor cos_, sin_;          // the same on the last input's device and dtype
};

}  // namespace

std::unique_ptr<runner::Model> make_llama(const LmConfig& config) {
  return std::make_unique<Llama>(config);
}

}  // namespace transformer_lm
