// Gradient communication hooks: reduce one flat gradient bucket across the
// process group (allreduce, fp16/bf16 compression, PowerSGD, ...).
//
// In a [distributed] training run, after every backward pass the host copies
// the gradients into flat buckets (parameters in reverse order, about
// [distributed] bucket_mb each, like DDP), calls reduce() once per bucket in
// bucket order, and copies the result back into the gradients before the
// optimizer step. The time from the first copy to the last is the step's
// `comm` phase; a rank that waits for a slower one waits inside it.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace runner {

/// The outcome of reducing one bucket.
struct CommResult {
  torch::Tensor reduced;          ///< the averaged gradient bucket, same shape and dtype as the input
  std::int64_t bytes_on_wire = 0; ///< bytes this rank sent for the bucket (algorithmic estimate)
};

/// A gradient communication hook. Include
/// <torch/csrc/distributed/c10d/ProcessGroup.hpp> in the implementation.
class CommHook {
 public:
  virtual ~CommHook() = default;
  /// Reduces `bucket` (a flat, contiguous gradient tensor on the run's device)
  /// over `group` and returns the mean over ranks. The hook may work in place
  /// (the host owns `bucket` and reads only `reduced` afterwards) and must
  /// finish the collective before returning (wait() on its work).
  /// `bucket_index` identifies the bucket across steps (for stateful hooks).
  virtual CommResult reduce(const torch::Tensor& bucket, std::int64_t bucket_index,
                            c10d::ProcessGroup& group) = 0;
};

}  // namespace runner
