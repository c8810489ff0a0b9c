// Gradient communication hooks: reduce one flat gradient bucket across the
// process group (allreduce, fp16/bf16 compression, PowerSGD, ...).
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
  std::int64_t bytes_on_wire = 0; ///< bytes this rank sent for the bucket
};

/// A gradient communication hook. Include
/// <torch/csrc/distributed/c10d/ProcessGroup.hpp> in the implementation.
class CommHook {
 public:
  virtual ~CommHook() = default;
  /// Reduces `bucket` (a flat, contiguous gradient tensor) over `group`;
  /// `bucket_index` identifies the bucket across steps (for stateful hooks).
  virtual CommResult reduce(const torch::Tensor& bucket, std::int64_t bucket_index,
                            c10d::ProcessGroup& group) = 0;
};

}  // namespace runner
