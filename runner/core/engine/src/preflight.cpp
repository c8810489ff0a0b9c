// The checks before any run (runner validate and runner run): what only the
// plugins can tell about an experiment on its device, reported at the
// experiment's keys so bad input exits 2 with nothing recorded.
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "errors.hpp"
#include "kernel_run.hpp"
#include "training_setup.hpp"
#include "runner/engine/augment.hpp"
#include "runner/engine/engine.hpp"
#include "runner/sdk.hpp"
#include "workload.hpp"

namespace runner {
namespace {

/// The model's rules over the data (its classes, sample shape, vocabulary),
/// reported at its plugin line; `hint` replaces the host's when given.
void check_model(const Experiment& experiment, const PluginHost& host,
                 const ModelContext& context, const std::string& hint = {}) {
  try {
    host.check_model_data(experiment.model.plugin, experiment.model.options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, experiment.model);
  } catch (const PluginDataError& e) {
    throw Error(experiment.model.where, e.what(), hint.empty() ? e.hint() : hint);
  }
}

}  // namespace

void check_before_runs(const Experiment& experiment, const PluginHost& host,
                       const std::string& device) {
  if (experiment.kind == RunKind::kernel) return check_kernel_before_runs(experiment, host, device);
  const torch::Device run_device(device);
  ModelContext model_context;
  model_context.device = run_device;
  model_context.seed = run_seed(experiment, 0);
  model_context.batch_size = experiment.data_settings.batch_size;
  model_context.training = experiment.kind == RunKind::train;
  // Without [data] there is no loader to give a sample shape or classes; a
  // model that needs them (a classification model: its data check says so)
  // is refused here, before init_from builds it, whose constructor would
  // fail with the same reason as a plugin failure with no position.
  if (!experiment.data)
    check_model(experiment, host, model_context,
                "this experiment has no [data] section; add one whose loader declares the "
                "sample shape and classes, e.g. [data] plugin = \"synthetic\", shape = [3, 32, "
                "32], classes = 10");
  if (!experiment.model_settings.init_from.empty()) {
    // The whole workload, on the CPU: the weights load into the real model.
    Workload w;
    const RankInfo rank;
    build(w, experiment, host, run_seed(experiment, 0), torch::kCPU, rank);
  }
  TrainingSetup setup(experiment, run_device);
  if (experiment.data) {
    const DataSettings& data = experiment.data_settings;
    if (data.pin_memory && !run_device.is_cuda())
      throw Error(experiment.where_of("data.pin_memory"),
                  "data.pin_memory needs a CUDA device; this run's device is " + device,
                  "remove it: batches on the CPU are not copied");
    // The loader's own checks (its files and their headers), then the
    // augmentations against its samples: bad data is found before any run.
    const std::uint64_t seed = run_seed(experiment, 0);
    const std::unique_ptr<Loader> loader =
        make_loader_for(experiment, host, loader_context(experiment, seed, 0, 1));
    std::vector<std::int64_t> shape;
    try {
      shape = Augmenter(data.augment, seed, true).output_shape(loader->spec().input_shape);
    } catch (const AugmentError& e) {
      rethrow_at_key(e, experiment);
    }
    if (experiment.model_settings.channels_last) setup.check_input_shape(shape);
    model_context.input_shape = shape;
    model_context.num_classes = loader->spec().num_classes;
    check_model(experiment, host, model_context);
  }
  // A model plugin that reads files (a compiled package, a TorchScript
  // file) checks them against the run now: another torch version, another
  // device, the data's shape or the batch size is an input error at the
  // option, before any run.
  if (!experiment.model.content_sha256.empty() && experiment.model_settings.init_from.empty())
    (void)make_model_for(experiment, host, model_context);
  if (experiment.kind != RunKind::train) return;
  // The optimizer's view of the run: the run's device and steps, over a
  // stand-in module in the run's dtype (the model is not built for this).
  torch::nn::Linear stand_in(2, 2);
  setup.prepare_model(*stand_in);
  const OptimizerContext context =
      make_optimizer_context(*stand_in, experiment.total_train_steps(), run_device);
  const std::unique_ptr<Optimizer> optimizer = make_optimizer_for(experiment, host, context);
  setup.attach(*optimizer, context.parameters);
}

}  // namespace runner
