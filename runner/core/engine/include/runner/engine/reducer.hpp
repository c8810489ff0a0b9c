// Gradient averaging for data-parallel training: gradients are packed into
// flat buckets (parameters in reverse order, as backward produces them,
// about bucket_mb each, like DDP), each bucket is reduced by the run's comm
// hook, and the result is unpacked into the gradients.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace runner {

class CommHook;

/// Sets every rank's `parameters` to rank 0's values (before the first step,
/// so that all ranks start from one model whatever their initialisation),
/// with c10d's broadcast_coalesced as DDP does. `group` must be owned by a
/// c10::intrusive_ptr (as make_process_group returns it).
void broadcast_parameters(const std::vector<torch::Tensor>& parameters, c10d::ProcessGroup& group);

class GradientReducer {
 public:
  /// Buckets `parameters` (which must outlive the reducer) into flat buffers
  /// of at most bucket_bytes each (a larger parameter gets a bucket of its
  /// own); a bucket holds one dtype and device.
  GradientReducer(std::vector<torch::Tensor> parameters, std::int64_t bucket_bytes,
                  CommHook& hook, c10d::ProcessGroup& group);

  /// Replaces every gradient by its mean over the group, bucket by bucket
  /// through the hook. A parameter without a gradient counts as zero (and
  /// gets one). Returns the bytes the hook reports sending. Throws
  /// runner::Error (run kind) when the hook returns a tensor of another size.
  std::int64_t reduce();

  /// Number of buckets.
  [[nodiscard]] std::size_t bucket_count() const { return buckets_.size(); }
  /// Parameter indices of each bucket, in bucket order (for tests and docs).
  [[nodiscard]] std::vector<std::vector<std::size_t>> layout() const;

 private:
  struct Bucket {
    std::vector<std::size_t> members;   // indices into parameters_
    std::vector<std::int64_t> offsets;  // element offset of each member in `flat`
    torch::Tensor flat;
    std::vector<torch::Tensor> slices;  // views of `flat` shaped like each member, made once
  };
  std::vector<torch::Tensor> parameters_;
  std::vector<Bucket> buckets_;
  CommHook& hook_;
  c10d::ProcessGroup& group_;
};

}  // namespace runner
