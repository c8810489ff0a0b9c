// Where a step's batches come from: the data pipeline over a loader, or
// the model's fixed example batch (inference without a loader), and their
// copy to the device.
#pragma once

#include <torch/types.h>

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "runner/engine/pipeline.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/sdk.hpp"

namespace runner {

// Feeds batches to a step: from a loader through the data pipeline, or a
// fixed example batch from the model (inference without a loader).
class BatchSource {
 public:
  /// Batches from `loader` through the data pipeline (it starts reading now).
  BatchSource(Loader* loader, const DataSettings& settings, std::uint64_t seed,
              torch::Device device, std::int64_t rank, std::int64_t world_size);
  /// The same example batch at every step.
  BatchSource(Batch fixed, torch::Device device) : fixed_(std::move(fixed)), device_(device) {}

  /// True when batches come from the loader (a fixed batch is prepared once).
  [[nodiscard]] bool from_loader() const { return pipeline_ != nullptr; }
  /// The pipeline (from_loader() only).
  [[nodiscard]] const DataPipeline& pipeline() const { return *pipeline_; }
  /// The fixed batch, to prepare it once for the training setup.
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
  void copy_to_device(Batch& batch) const;

 private:
  std::unique_ptr<DataPipeline> pipeline_;
  Batch fixed_;
  torch::Device device_;
  bool pinned_ = false;
#ifdef RUNNER_WITH_CUDA
  std::optional<c10::cuda::CUDAStream> copy_stream_;
#endif
};

}  // namespace runner
