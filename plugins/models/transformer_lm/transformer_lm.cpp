// Model `transformer_lm`: a decoder-only causal language model in two
// flavours, each in the parameter names of a public reference so its state
// dicts load by name:
//   gpt2   karpathy/nanoGPT's GPT (model.py): transformer.wte, transformer.wpe,
//          transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
//          mlp.c_proj}, transformer.ln_f; lm_head tied to transformer.wte.
//   llama  Hugging Face transformers' LlamaForCausalLM: model.embed_tokens,
//          model.layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
//          input_layernorm, post_attention_layernorm}, model.norm, lm_head.
// checkpoint = "blocks" recomputes every transformer block in the backward
// pass (runner/checkpoint.hpp).
// This file: the options, their resolution against the loader, what both
// flavours share (LanguageModel) and the registration.
#include "transformer_lm.hpp"

#include <torch/nn/functional/loss.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace transformer_lm {

namespace {

std::string shape_of(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string str(std::int64_t n) { return std::to_string(n); }

void check_positions(std::int64_t seq_len, std::int64_t max_seq_len) {
  if (seq_len > max_seq_len)
    throw runner::OptionError("max_seq_len", "seq_len = " + str(seq_len) +
                                                 " is longer than max_seq_len = " +
                                                 str(max_seq_len) +
                                                 " (the positions the model has); raise "
                                                 "max_seq_len or shorten the sequences");
}

}  // namespace

void check_options(const LmOptions& o) {
  if (o.flavour != "gpt2" && o.flavour != "llama")
    throw runner::OptionError("flavour",
                              "flavour must be \"gpt2\" or \"llama\", not \"" + o.flavour + "\"");
  if (o.width % o.heads != 0)
    throw runner::OptionError("width", "width = " + str(o.width) + " is not divisible by heads = " +
                                           str(o.heads) +
                                           "; each head takes width / heads dimensions, so make "
                                           "width a multiple of heads");
  if (o.flavour == "gpt2") {
    if (o.kv_heads != 0 && o.kv_heads != o.heads)
      throw runner::OptionError(
          "kv_heads", "kv_heads = " + str(o.kv_heads) +
                          " asks for grouped-query attention, which only the llama flavour has; "
                          "for gpt2 leave kv_heads at 0 (one key/value head per head)");
  } else {
    const std::int64_t kv_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
    if (o.heads % kv_heads != 0)
      throw runner::OptionError("kv_heads", "kv_heads = " + str(kv_heads) +
                                                " does not divide heads = " + str(o.heads) +
                                                "; each key/value head serves heads / kv_heads "
                                                "query heads, so pick a divisor of heads (0 = "
                                                "heads)");
    if ((o.width / o.heads) % 2 != 0)
      throw runner::OptionError(
          "width", "rotary position embeddings need an even head dimension, but width / heads = " +
                       str(o.width) + " / " + str(o.heads) + " = " + str(o.width / o.heads) +
                       "; change width or heads");
    if (!o.activation_op.empty())
      throw runner::OptionError(
          "activation_op", "the llama flavour's MLP is SwiGLU (silu(gate_proj(x)) * up_proj(x), "
                           "no bias): it has no GELU for activation_op = \"" +
                               o.activation_op + "\" to replace; leave activation_op empty");
  }
  if (o.seq_len != 0 && o.max_seq_len != 0) check_positions(o.seq_len, o.max_seq_len);
}

LmConfig resolve(const LmOptions& o, const runner::ModelContext& context) {
  check_options(o);
  if (context.input_shape.size() > 1)
    throw std::invalid_argument(
        "needs token sequences from the loader (input_shape [seq_len]), but it declares " +
        shape_of(context.input_shape) + "; use a token loader such as synthetic_tokens");
  LmConfig c;
  c.llama = o.flavour == "llama";

  const std::int64_t loader_vocab = context.num_classes;
  if (o.vocab == 0) {
    if (loader_vocab < 2)
      throw runner::OptionError(
          "vocab",
          "the vocabulary size is unknown: set vocab, or use a loader that declares it (as "
          "num_classes), such as synthetic_tokens");
    c.vocab = loader_vocab;
  } else {
    if (o.vocab < loader_vocab)
      throw runner::OptionError("vocab", "vocab = " + str(o.vocab) +
                                             " is smaller than the loader's " + str(loader_vocab) +
                                             " tokens; raise it or leave it at 0 (the loader's)");
    c.vocab = o.vocab;
  }

  const std::int64_t loader_seq = context.input_shape.empty() ? 0 : context.input_shape[0];
  if (o.seq_len == 0) {
    if (loader_seq == 0)
      throw runner::OptionError(
          "seq_len",
          "the sequence length is unknown: set seq_len, or use a loader of token sequences "
          "(input_shape [seq_len]), such as synthetic_tokens");
    c.seq_len = loader_seq;
  } else {
    if (loader_seq != 0 && o.seq_len != loader_seq)
      throw runner::OptionError("seq_len", "seq_len = " + str(o.seq_len) +
                                               " differs from the loader's sequences of " +
                                               str(loader_seq) +
                                               " tokens; leave it at 0 (the loader's) or change "
                                               "the loader's");
    c.seq_len = o.seq_len;
  }
  c.max_seq_len = o.max_seq_len == 0 ? c.seq_len : o.max_seq_len;
  check_positions(c.seq_len, c.max_seq_len);

  c.width = o.width;
  c.depth = o.depth;
  c.heads = o.heads;
  if (!c.llama) {
    c.kv_heads = c.heads;
    c.mlp_hidden = o.mlp_hidden == 0 ? 4 * c.width : o.mlp_hidden;
  } else {
    c.kv_heads = o.kv_heads == 0 ? c.heads : o.kv_heads;
    // Meta's Llama: two thirds of 4 x width, rounded up to a multiple of multiple_of.
    const std::int64_t two_thirds = 8 * c.width / 3;
    c.mlp_hidden = o.mlp_hidden != 0
                       ? o.mlp_hidden
                       : (two_thirds + o.multiple_of - 1) / o.multiple_of * o.multiple_of;
  }
  c.norm_eps = o.norm_eps;
  c.rope_theta = o.rope_theta;
  c.dropout = o.dropout;
  c.checkpoint = {o.checkpoint, o.checkpoint_every};
  namespace ops = runner_models::ops;
  if (c.llama) {
    c.ops.rmsnorm = ops::find_op("norm_op", o.norm_op, ops::kRmsNorm, context);
  } else {
    c.ops.layernorm = ops::find_op("norm_op", o.norm_op, ops::kLayerNorm, context);
    c.ops.bias_gelu = ops::find_op("activation_op", o.activation_op, ops::kBiasGelu, context);
  }
  return c;
}

std::map<std::string, std::string> LmOps::provenance() const {
  std::map<std::string, std::string> out;
  if (layernorm) out["norm_op"] = runner_models::ops::describe(*layernorm);
  if (rmsnorm) out["norm_op"] = runner_models::ops::describe(*rmsnorm);
  if (bias_gelu) out["activation_op"] = runner_models::ops::describe(*bias_gelu);
  return out;
}

double forward_flops(const LmConfig& c) {
  const auto t = static_cast<double>(c.seq_len);
  const auto width = static_cast<double>(c.width);
  const auto kv_width = static_cast<double>(c.kv_heads * c.head_dim());
  // Multiply-accumulates per token of one block's weight matrices.
  const double projections = 2 * width * width + 2 * width * kv_width;  // q, o; k, v
  const double mlp = (c.llama ? 3 : 2) * width * static_cast<double>(c.mlp_hidden);
  // QK^T and AV: every query against every key (the causal mask saves no
  // FLOPs in the counter's formula), over heads x head_dim = width.
  const double attention = 2 * t * width;
  const double head = width * static_cast<double>(c.vocab);
  return 2 * t * (static_cast<double>(c.depth) * (projections + mlp + attention) + head);
}

torch::Tensor LanguageModel::forward(const runner::Batch& batch) {
  const torch::Tensor& ids = batch.inputs;
  if (ids.scalar_type() != torch::kLong || ids.dim() != 2)
    throw std::invalid_argument(
        "expects token ids as an int64 tensor [batch, seq], got a " +
        std::string(c10::toString(ids.scalar_type())) + " tensor of shape " +
        shape_of(ids.sizes().vec()) + "; use a token loader such as synthetic_tokens");
  if (ids.size(1) > config_.max_seq_len)
    throw std::invalid_argument("a batch of " + str(ids.size(1)) +
                                "-token sequences is longer than max_seq_len = " +
                                str(config_.max_seq_len) + "; raise max_seq_len");
  return logits(ids);
}

torch::Tensor LanguageModel::loss(const torch::Tensor& output, const runner::Batch& batch) {
  return torch::nn::functional::cross_entropy(output.reshape({-1, output.size(-1)}),
                                              batch.targets.reshape({-1}));
}

runner::Batch LanguageModel::example_batch(std::int64_t batch_size, torch::Device device) {
  const torch::Tensor stream = torch::randint(
      config_.vocab, {batch_size, config_.seq_len + 1},
      torch::TensorOptions().dtype(torch::kLong).device(device));
  using torch::indexing::Slice;
  return {stream.index({Slice(), Slice(0, -1)}).contiguous(),
          stream.index({Slice(), Slice(1, torch::indexing::None)}).contiguous(), batch_size};
}

runner::EvalTally LanguageModel::evaluate(const torch::Tensor& output,
                                          const runner::Batch& batch) {
  runner::EvalTally tally;
  tally.count = static_cast<double>(batch.targets.numel());
  tally.sums["loss"] = loss(output, batch).item<double>() * tally.count;
  return tally;
}

std::map<std::string, double> LanguageModel::finish_evaluation(
    const std::map<std::string, double>& means) {
  const auto loss = means.find("loss");
  if (loss == means.end()) return {};
  return {{"perplexity", std::exp(loss->second)}};
}

namespace {

void register_plugins(runner::Registrar& registrar) {
  using O = LmOptions;
  runner::OptionBinder<O> options;
  options.field("flavour", &O::flavour,
                "gpt2: nanoGPT's GPT (LayerNorm, learned positions, GELU, biases, tied head); "
                "llama: Hugging Face's LlamaForCausalLM (RMSNorm, rotary, SwiGLU, GQA)")
      .one_of({"gpt2", "llama"});
  options.field("vocab", &O::vocab, "tokens of the embedding and the head; 0 = the loader's")
      .range(0, 1 << 24);
  options.field("seq_len", &O::seq_len,
                "tokens per sequence; 0 = the loader's (a different value is an error)")
      .range(0, 1 << 20);
  options.field("width", &O::width, "model (residual stream) width").range(1, 1 << 16);
  options.field("depth", &O::depth, "transformer blocks").range(1, 1024);
  options.field("heads", &O::heads, "attention (query) heads; must divide width")
      .range(1, 1024);
  options.field("kv_heads", &O::kv_heads,
                "llama: key/value heads of grouped-query attention, a divisor of heads; "
                "0 = heads (gpt2: 0 or heads)")
      .range(0, 1024);
  options.field("mlp_hidden", &O::mlp_hidden,
                "MLP hidden width; 0 = 4 x width (gpt2) or 8 x width / 3 rounded up to a "
                "multiple of multiple_of (llama)")
      .range(0, 1 << 20);
  options.field("multiple_of", &O::multiple_of,
                "llama: the default mlp_hidden is rounded up to a multiple of this (Meta's 256)")
      .range(1, 1 << 16);
  options.field("max_seq_len", &O::max_seq_len,
                "positions (gpt2: rows of transformer.wpe; llama: rotary table); 0 = seq_len")
      .range(0, 1 << 20);
  options.field("norm_eps", &O::norm_eps, "epsilon of LayerNorm (gpt2) or RMSNorm (llama)")
      .range(0.0, 1.0);
  options.field("rope_theta", &O::rope_theta, "llama: base of the rotary frequencies")
      .range(1.0, std::nullopt);
  options.field("dropout", &O::dropout,
                "dropout probability in training (gpt2: embeddings, attention, residual "
                "branches, as nanoGPT; llama: attention, as Hugging Face)")
      .range(0.0, 0.99);
  runner::add_checkpoint_options(options, &O::checkpoint, &O::checkpoint_every,
                                 "transformer block");
  options.check(check_options);
  options
      .field("norm_op", &O::norm_op,
             "custom op for every norm, \"namespace::name\" from a loaded kernel plugin: gpt2 "
             "takes runner::layernorm's schema, llama runner::rmsnorm's; \"\" = ATen's")
      .added_later_with_default();
  options
      .field("activation_op", &O::activation_op,
             "gpt2: custom op for the MLP's bias + GELU (tanh), runner::bias_gelu's schema, "
             "fed c_fc's bias; \"\" = ATen's (llama: must stay empty)")
      .added_later_with_default();
  registrar.add_model("transformer_lm",
                      "decoder-only causal language model: gpt2 (nanoGPT's names) or llama "
                      "(Hugging Face's LlamaForCausalLM names)",
                      options,
                      [](const O& o, const runner::ModelContext& context) {
                        const LmConfig config = resolve(o, context);
                        return config.llama ? make_llama(config) : make_gpt2(config);
                      },
                      [](const O& o, const runner::ModelContext& context) {
                        (void)resolve(o, context);
                      });
}

}  // namespace

}  // namespace transformer_lm

RUNNER_PLUGIN(transformer_lm::register_plugins)
