// The training setup of a run: what the loops do besides forward, backward
// and the optimizer step, as the experiment chose it. Precision (bf16
// weights, or autocast with loss scaling for fp16), channels-last memory
// format, the learning-rate schedule, gradient clipping; and what each step
// did (lr, gradient norm, loss scale, skipped), read after the step's clock
// stops. The units (schedules, scaler, autocast, clipping) live in
// runner_training and are checked against PyTorch there.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/experiment/experiment.hpp"
#include "runner/training/autocast.hpp"
#include "runner/training/grad_scaler.hpp"
#include "runner/training/precision.hpp"
#include "runner/training/schedule.hpp"
#include "runner/sdk.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// The training setup of one run (or of the preflight check, which builds it on the CPU).
class TrainingSetup {
 public:
  TrainingSetup(const Experiment& experiment, torch::Device device);

  /// Throws runner::Error at model.channels_last when the samples are not
  /// images ([channels, height, width]).
  void check_input_shape(const std::vector<std::int64_t>& sample_shape) const;

  /// Converts a model on its device: bf16 parameters and buffers, channels-last 4-D tensors.
  void prepare_model(torch::nn::Module& module) const;
  /// Converts a batch's inputs as prepare_model converted the model (floating inputs only).
  void prepare_batch(Batch& batch) const;
  /// Autocast for a forward pass (amp_*), else nothing.
  [[nodiscard]] std::optional<training::AutocastGuard> autocast() const;

  /// Training: takes the optimizer (its groups' lrs are the schedule's base
  /// lrs) and the parameters whose gradients are clipped. Throws
  /// runner::Error (input, at the key responsible) when the optimizer cannot
  /// follow the training setup: a one-cycle schedule cycling momentum on an optimizer
  /// without one, amp_fp16 with an optimizer whose parameter groups do not
  /// hold the parameters it was given.
  void attach(Optimizer& optimizer, const std::vector<torch::Tensor>& parameters);
  /// The loss backward runs on: scaled with amp_fp16.
  [[nodiscard]] torch::Tensor loss_for_backward(const torch::Tensor& loss) const;
  /// Before optimizer step `step` (0-based): unscale and check the
  /// gradients, clip them, set the step's lr (and momentum). False when the
  /// optimizer step must be skipped (a non-finite gradient under amp_fp16).
  bool before_step(std::int64_t step);
  /// After the (possibly skipped) optimizer step: the scaler's update.
  void after_step();
  /// Fills the training setup's fields of the step's sample; reads device values
  /// (call after the step's clock has stopped).
  void record(store::Sample& sample) const;

  [[nodiscard]] training::Precision precision() const { return precision_; }
  [[nodiscard]] bool scales_loss() const { return scaler_ != nullptr; }

 private:
  const Experiment& experiment_;
  torch::Device device_;
  training::Precision precision_;
  std::optional<training::Schedule> schedule_;
  Optimizer* optimizer_ = nullptr;
  std::vector<double> base_lrs_;
  std::vector<torch::Tensor> parameters_;  // the optimizer's, whose gradients are unscaled and clipped
  std::unique_ptr<training::GradScaler> scaler_;
  // This step's record.
  double lr_ = std::nan("");
  torch::Tensor grad_norm_;
  double scale_ = std::nan("");
  int skipped_ = -1;
};

}  // namespace runner
