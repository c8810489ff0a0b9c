// Where a step's batches come from (batch_source.hpp): the pipeline's
// start, and the copy to the device that overlaps the previous step.
#include "batch_source.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <utility>

namespace runner {

BatchSource::BatchSource(Loader* loader, const DataSettings& settings, std::uint64_t seed,
                         torch::Device device, std::int64_t rank, std::int64_t world_size)
    : device_(device), pinned_(settings.pin_memory) {
  pipeline_ = std::make_unique<DataPipeline>(*loader, settings, seed, rank, world_size);
#ifdef RUNNER_WITH_CUDA
  if (device_.is_cuda() && pinned_)
    copy_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_.index());
#endif
}

void BatchSource::copy_to_device(Batch& batch) const {
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

}  // namespace runner
