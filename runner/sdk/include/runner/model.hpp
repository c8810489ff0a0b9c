// Model plugins: build a torch::nn::Module, run it on a batch, compute the loss.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/loader.hpp"

namespace runner {

/// What a model factory knows about the run it is built for.
struct ModelContext {
  torch::Device device = torch::kCPU;     ///< where the model will run (the host moves it there)
  std::vector<std::int64_t> input_shape;  ///< shape of one input sample (no batch dimension)
  std::int64_t num_classes = 0;           ///< classes of the task; 0 when not a classification task
  std::uint64_t seed = 0;                 ///< the run's seed (the host has already seeded LibTorch with it)
  std::int64_t rank = 0;                  ///< this process's rank in a data-parallel run
  std::int64_t world_size = 1;            ///< number of ranks (1 without [distributed])
  std::int64_t batch_size = 0;            ///< samples per batch of the run (0: unknown)
  bool training = false;                  ///< the run trains (false: inference)
};

/// What a model says about its quality on one held-out batch: for each
/// metric, its sum over the batch's units (samples, or tokens for a language
/// model), and how many units there were. The host adds the tallies of every
/// evaluation batch and reports sum / count per metric (then finish_evaluation()).
struct EvalTally {
  std::map<std::string, double> sums;  ///< metric -> sum over the units ("loss", "accuracy", ...)
  double count = 0;                    ///< units in the batch
};

/// A model under test.
class Model {
 public:
  virtual ~Model() = default;
  /// The module whose parameters are trained; the host moves it to the device.
  virtual torch::nn::Module& module() = 0;
  /// Forward pass on a batch already on the model's device.
  virtual torch::Tensor forward(const Batch& batch) = 0;
  /// Task loss (a scalar) from forward's output and the batch.
  virtual torch::Tensor loss(const torch::Tensor& output, const Batch& batch) = 0;
  /// A batch of `batch_size` example inputs for inference without a loader.
  virtual Batch example_batch(std::int64_t batch_size, torch::Device device) = 0;
  /// Number of trainable parameters (the default counts module() parameters).
  virtual std::int64_t parameter_count() {
    std::int64_t n = 0;
    for (const auto& p : module().parameters())
      if (p.requires_grad()) n += p.numel();
    return n;
  }
  /// Forward FLOPs per sample, when the model can say (training ~ 3x this).
  virtual std::optional<double> flops_per_sample() { return std::nullopt; }
  /// Tokens per sample for language models (gives tokens/s); none by default.
  virtual std::optional<double> tokens_per_sample() { return std::nullopt; }
  /// Quality on one held-out batch (called under no-grad, module in eval
  /// mode). The default: the task loss, weighted by the batch's samples.
  virtual EvalTally evaluate(const torch::Tensor& output, const Batch& batch) {
    EvalTally tally;
    tally.count = static_cast<double>(batch.size);
    tally.sums["loss"] = loss(output, batch).item<double>() * tally.count;
    return tally;
  }
  /// Metrics derived from the means over the evaluation set (perplexity from
  /// the loss, ...); returned metrics are added to `means`. None by default.
  virtual std::map<std::string, double> finish_evaluation(
      const std::map<std::string, double>& /*means*/) {
    return {};
  }
  /// Names a Python state dict of this model holds for a parameter the
  /// module registers once under another name (alias -> parameter), as tied
  /// embeddings are: `lm_head.weight` -> `transformer.wte.weight`. Loading
  /// weights accepts the alias (the module's parameter is already set from
  /// its own name); saving writes it as a copy, so Python's strict
  /// load_state_dict finds every key. None by default.
  virtual std::map<std::string, std::string> tied_parameters() { return {}; }
  /// Facts about what the model runs, recorded with every run as attributes
  /// "model.KEY" (`runner show`): for a compiled model, the torch version
  /// that made it, its device, its dynamic dimensions. None by default.
  virtual std::map<std::string, std::string> provenance() { return {}; }
};

}  // namespace runner
