// The workload of a run: the plugins it is built from (loader, model,
// optimizer, comm hook) and what feeds and synchronises them, built the same
// way by a run's ranks and by the checks before any run (preflight.cpp).
#pragma once

#include <torch/types.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "evaluation.hpp"
#include "recipe.hpp"
#include "runner/comm_hook.hpp"
#include "runner/engine/augment.hpp"
#include "runner/engine/engine.hpp"
#include "runner/engine/pipeline.hpp"
#include "runner/engine/ranks.hpp"
#include "runner/engine/reducer.hpp"
#include "runner/sdk.hpp"

namespace runner {

// Feeds batches to a step: from a loader through the data pipeline, or a
// fixed example batch from the model (inference without a loader).
class BatchSource {
 public:
  BatchSource(Loader* loader, const DataSettings& settings, std::uint64_t seed,
              torch::Device device, std::int64_t rank, std::int64_t world_size)
      : device_(device), pinned_(settings.pin_memory) {
    pipeline_ = std::make_unique<DataPipeline>(*loader, settings, seed, rank, world_size);
#ifdef RUNNER_WITH_CUDA
    if (device_.is_cuda() && pinned_)
      copy_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
#endif
  }
  BatchSource(Batch fixed, torch::Device device) : fixed_(std::move(fixed)), device_(device) {}

  /// True when batches come from the loader (a fixed batch is prepared once).
  [[nodiscard]] bool from_loader() const { return pipeline_ != nullptr; }
  /// The pipeline (from_loader() only).
  [[nodiscard]] const DataPipeline& pipeline() const { return *pipeline_; }
  /// The fixed batch, to prepare it once for the recipe.
  Batch& fixed() { return fixed_; }

  /// The next batch, on the host: the data phase, the time the step waits for it.
  Batch next() {
    if (!pipeline_) return fixed_;
    return pipeline_->next();
  }

  /// True when batches must be copied to the device (the h2d phase).
  [[nodiscard]] bool needs_copy() const { return pipeline_ != nullptr && !device_.is_cpu(); }

  /// Issues the host-to-device copy of a batch. Pinned batches (data.pin_memory)
  /// on CUDA are copied without blocking on a side stream, which the compute
  /// stream waits for: the copy overlaps the previous step's kernels. Others
  /// are copied from pageable memory, which blocks.
  void copy_to_device(Batch& batch) const {
#ifdef RUNNER_WITH_CUDA
    if (copy_stream_) {
      const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
      {
        const c10::cuda::CUDAStreamGuard on_side(*copy_stream_);
        batch.inputs = batch.inputs.to(device_, /*non_blocking=*/true);
        if (batch.targets.defined()) batch.targets = batch.targets.to(device_, true);
      }
      at::cuda::CUDAEvent copied;
      copied.record(*copy_stream_);
      copied.block(compute);
      // Allocated on the side stream, used on the compute stream.
      batch.inputs.record_stream(compute);
      if (batch.targets.defined()) batch.targets.record_stream(compute);
      return;
    }
#endif
    batch.inputs = batch.inputs.to(device_, /*non_blocking=*/pinned_);
    if (batch.targets.defined()) batch.targets = batch.targets.to(device_, pinned_);
  }

 private:
  std::unique_ptr<DataPipeline> pipeline_;
  Batch fixed_;
  torch::Device device_;
  bool pinned_ = false;
#ifdef RUNNER_WITH_CUDA
  std::optional<c10::cuda::CUDAStream> copy_stream_;
#endif
};

// This process's place in a data-parallel run (rank 0 of 1 otherwise).
struct RankInfo {
  const Rendezvous* rendezvous = nullptr;  // null: not distributed
  RankLink* link = nullptr;                // the store, heartbeat, failures, step times
  [[nodiscard]] int rank() const { return rendezvous ? rendezvous->rank : 0; }
  [[nodiscard]] int world_size() const { return rendezvous ? rendezvous->world_size : 1; }
};

// Everything a loop needs, built from the plugins.
struct Workload {
  Workload() = default;
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;
  ~Workload() = default;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  const PluginDescriptor* optimizer_plugin = nullptr;  // names it when LibTorch's step throws
  std::unique_ptr<BatchSource> batches;
  std::int64_t batch_size = 0;
  // Data-parallel runs: the group, the hook and the gradient synchronisation
  // (the sync is declared last of the three: it goes first).
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::unique_ptr<CommHook> comm_hook;
  std::unique_ptr<GradientSync> sync;
  std::vector<CommStep> comm_steps;  // one per step, as out.samples
  bool gradients_computed = false;   // set by the sync when backward only communicates
  // Weights: the file read at start (and the names strict = false skipped).
  std::optional<store::RunFile> init_file;
  std::vector<std::string> skipped;
  std::unique_ptr<Evaluator> evaluator;  // [eval], rank 0
  std::unique_ptr<Recipe> recipe;        // precision, memory format, schedule, clipping
  std::int64_t accumulate = 1;           // micro-batches per optimizer step
};

/// The experiment's loader plugin, its option and data errors reported at
/// the experiment's keys.
std::unique_ptr<Loader> make_loader_for(const Experiment& exp, const PluginHost& host,
                                        const LoaderContext& context);

/// The experiment's model plugin, its option and data errors reported at
/// the experiment's keys.
std::unique_ptr<Model> make_model_for(const Experiment& exp, const PluginHost& host,
                                      const ModelContext& context);

/// The experiment's optimizer plugin, its option errors reported at the
/// experiment's keys.
std::unique_ptr<Optimizer> make_optimizer_for(const Experiment& exp, const PluginHost& host,
                                              const OptimizerContext& context);

/// What the loader of `split` is told about the run and this rank.
LoaderContext loader_context(const Experiment& exp, std::uint64_t seed, std::int64_t rank,
                             std::int64_t world_size, Split split = Split::train);

/// An augmentation that does not apply to the loader's samples, at its key.
[[noreturn]] void rethrow_at_key(const AugmentError& e, const Experiment& exp);

/// Builds `w` for `rank` on `device`: loader and its pipeline, recipe, model
/// (with its init_from weights), optimizer, and for a data-parallel rank the
/// process group and gradient synchronisation.
void build(Workload& w, const Experiment& exp, const PluginHost& host, std::uint64_t seed,
           torch::Device device, const RankInfo& rank);

}  // namespace runner
