// Held-out evaluation ([eval]) and the weights a run starts from and saves
// ([model] init_from, [train] save_to): the parts of a run around its loop.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/engine/augment.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "runner/sdk.hpp"
#include "runner/store/store.hpp"

namespace runner {

class TrainingSetup;

/// Evaluates a model on the first `batches` batches of the loader's eval
/// split, in order (the same samples every time), under no-grad with the
/// module in eval mode (then restored to the mode it was in). The mean of
/// each metric of Model::evaluate over the units it counts, plus the
/// metrics of Model::finish_evaluation.
class Evaluator {
 public:
  /// Builds the eval split's loader (data.plugin with split = eval). Throws
  /// runner::Error (run) when the experiment has no [data] to evaluate on.
  Evaluator(const Experiment& experiment, const PluginHost& host, std::uint64_t seed,
            torch::Device device);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  /// Evaluates `model` after `step` optimizer steps; returns the metrics and
  /// appends them to `out` as (step, metric, value).
  /// The training setup's precision and memory format apply to the held-out batches
  /// as to the training ones.
  std::map<std::string, double> evaluate(Model& model, const TrainingSetup& setup, std::int64_t step,
                                         std::vector<store::Evaluation>& out);

 private:
  std::unique_ptr<Loader> loader_;
  std::vector<std::vector<std::int64_t>> batches_;  // random access: the samples of each batch
  std::vector<Batch> streamed_;                      // streaming: the batches, read once
  std::unique_ptr<Augmenter> augment_;               // the deterministic augmentations
  torch::Device device_;
};

/// The tensors of `experiment`'s init_from file loaded into `model` by name
/// (Model::tied_parameters() aliases accepted; strict as the experiment
/// says). Throws runner::Error naming the file on any mismatch, loading
/// nothing. Returns the record of the file, its skipped names in `skipped`.
store::RunFile load_initial_weights(const Experiment& experiment, Model& model,
                                    std::vector<std::string>& skipped);

/// The files the model plugin's content() options name (an AOTInductor
/// package, a TorchScript file), as records with roles "model.OPTION",
/// hashed now. Throws runner::Error when a file's bytes changed since the
/// experiment was validated: another file is another trial.
std::vector<store::RunFile> model_files(const Experiment& experiment);

/// [model] check_against: runs `model` (eval mode, no grad, the training setup's
/// precision and memory format) on the file's tensor "input" and compares
/// the result with its tensor "output" before anything is timed. Appends
/// output_max_abs_error, output_max_rel_error (max |y - ref| / max |ref|)
/// and first_call_s (that call's time) to `metrics`; throws runner::Error
/// (run) when the shapes differ or the relative error exceeds
/// check_tolerance (NaN never passes): a path that computes something else
/// is failed, never timed. Returns the file's record (role "check_against").
store::RunFile check_outputs(const Experiment& experiment, Model& model, const TrainingSetup& setup,
                             torch::Device device, std::vector<store::Metric>& metrics);

/// Writes the model's parameters and buffers (and tied aliases) to
/// `path` as safetensors, with metadata naming the experiment and run.
store::RunFile save_weights(const std::filesystem::path& path, const Experiment& experiment,
                            Model& model, std::int64_t repeat_index, std::int64_t steps);

}  // namespace runner
