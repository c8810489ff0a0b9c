// Model `transformer_lm`: what the two flavours share. A flavour (gpt2.cpp,
// llama.cpp) is its layers, registered on the root module under the public
// names of its reference implementation, and its logits over a batch of ids;
// LanguageModel checks the batch and provides the loss, the evaluation
// metrics, example batches, tokens and FLOPs per sequence.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <runner/checkpoint.hpp>
#include <runner/sdk.hpp>

#include "../common/custom_ops.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace transformer_lm {

/// The options as the experiment gives them (0 = derived; see resolve()).
struct LmOptions {
  std::string flavour = "gpt2";
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;
  std::int64_t width = 256;
  std::int64_t depth = 4;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 0;
  std::int64_t mlp_hidden = 0;
  std::int64_t multiple_of = 256;
  std::int64_t max_seq_len = 0;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  double dropout = 0.0;
  std::string checkpoint = "none";
  std::int64_t checkpoint_every = 2;
  std::string norm_op;        // "": ATen's LayerNorm (gpt2) or the model's RMSNorm (llama)
  std::string activation_op;  // "": ATen's GELU (gpt2; llama has none to replace)
};

/// The custom ops the options name, looked up and checked (empty: ATen's path).
struct LmOps {
  std::optional<c10::TypedOperatorHandle<runner_models::ops::LayerNormFn>> layernorm;  ///< gpt2
  std::optional<c10::TypedOperatorHandle<runner_models::ops::RmsNormFn>> rmsnorm;      ///< llama
  std::optional<c10::TypedOperatorHandle<runner_models::ops::BiasGeluFn>> bias_gelu;   ///< gpt2
  /// Model::provenance: "norm_op" / "activation_op" -> the op's schema and registration.
  [[nodiscard]] std::map<std::string, std::string> provenance() const;
};

/// The options resolved against the loader and checked: every size is set.
struct LmConfig {
  bool llama = false;
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;
  std::int64_t width = 0;
  std::int64_t depth = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // = heads for gpt2
  std::int64_t mlp_hidden = 0;
  std::int64_t max_seq_len = 0;
  double norm_eps = 0;
  double rope_theta = 0;
  double dropout = 0;
  runner::CheckpointPolicy checkpoint;  ///< which blocks are recomputed in backward
  LmOps ops;                            ///< custom norm / activation ops
  [[nodiscard]] std::int64_t head_dim() const { return width / heads; }
};

/// The rules over the options alone (width divisible by heads, kv_heads,
/// rotary's even head dimension, seq_len <= max_seq_len when both are set):
/// throws runner::OptionError naming the option to change. Needs no LibTorch
/// and no data, so the host checks every trial with it before any run.
void check_options(const LmOptions& options);

/// check_options(), then fills the derived sizes from the loader's data
/// (context) and checks them: runner::OptionError for an option that does
/// not fit the data (vocab, seq_len, max_seq_len) or a norm_op or
/// activation_op the model cannot call, std::invalid_argument for data that
/// are not token sequences. The model's data check and its factory call it.
LmConfig resolve(const LmOptions& options, const runner::ModelContext& context);

/// Forward FLOPs of one sequence of seq_len tokens, counted as
/// torch.utils.flop_counter counts them: 2 per multiply-accumulate of every
/// matrix product (projections, attention's QK^T and AV over the full
/// sequence, the LM head), nothing for embeddings, norms or activations.
double forward_flops(const LmConfig& config);

/// A decoder-only causal language model: ids [batch, seq] (int64) to logits
/// [batch, seq, vocab]; the targets are the next ids, [batch, seq].
class LanguageModel : public runner::Model {
 public:
  explicit LanguageModel(const LmConfig& config) : config_(config) {}

  torch::nn::Module& module() override { return *root_; }
  /// Checks the batch's ids (int64, [batch, seq], seq <= max_seq_len), then logits().
  torch::Tensor forward(const runner::Batch& batch) override;
  /// Mean cross-entropy over every token of the batch.
  torch::Tensor loss(const torch::Tensor& output, const runner::Batch& batch) override;
  /// Uniformly random ids and targets of seq_len tokens.
  runner::Batch example_batch(std::int64_t batch_size, torch::Device device) override;
  std::optional<double> flops_per_sample() override { return forward_flops(config_); }
  std::optional<double> tokens_per_sample() override {
    return static_cast<double>(config_.seq_len);
  }
  /// The loss summed over the batch's tokens; the count is its tokens.
  runner::EvalTally evaluate(const torch::Tensor& output, const runner::Batch& batch) override;
  /// perplexity = exp(mean loss per token).
  std::map<std::string, double> finish_evaluation(
      const std::map<std::string, double>& means) override;
  /// The custom ops it calls, if any (LmOps::provenance).
  std::map<std::string, std::string> provenance() override { return config_.ops.provenance(); }

 protected:
  /// The logits of checked ids [batch, seq] on the module's device.
  virtual torch::Tensor logits(const torch::Tensor& ids) = 0;
  [[nodiscard]] const LmConfig& config() const { return config_; }
  /// Registers a child of the root module under `name` and returns it.
  template <typename ModuleType>
  ModuleType register_module(std::string name, ModuleType module) {
    return root_->register_module(std::move(name), std::move(module));
  }

 private:
  LmConfig config_;
  std::shared_ptr<torch::nn::Module> root_ = std::make_shared<torch::nn::Module>();
};

/// The GPT-2 flavour in nanoGPT's names (gpt2.cpp).
std::unique_ptr<runner::Model> make_gpt2(const LmConfig& config);
/// The Llama flavour in Hugging Face's LlamaForCausalLM names (llama.cpp).
std::unique_ptr<runner::Model> make_llama(const LmConfig& config);

}  // namespace transformer_lm
