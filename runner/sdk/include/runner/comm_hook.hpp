// Gradient communication hooks: DDP comm hooks (allreduce, fp16/bf16
// compression, PowerSGD, ...) as plugins.
//
// In a [distributed] training run the host trains through c10d::Reducer,
// PyTorch DDP's own engine: gradients are written into flat buckets
// (parameters in reverse order, the first bucket [distributed]
// first_bucket_mb, the others bucket_mb, as DDP does) and, as soon as every
// gradient of a bucket has been computed, while backward goes on with the
// earlier layers, the Reducer hands the bucket to the run's hook. The hook
// starts its collectives and returns at once with a future; the Reducer
// waits for all futures at the end of backward and copies each result into
// the gradients. This is DDP's c10d::CommHookInterface contract (runHook),
// with the process group passed in and the bytes the hook sends returned.
//
// With [distributed] reducer = "after_backward" the host instead packs the
// buckets after backward has finished and calls the hook once per bucket,
// waiting for each (no overlap): the same hook serves both.
//
// Hooks may be called on an autograd thread and their futures completed on a
// communication thread; a hook with state (PowerSGD) sees the buckets of one
// step in index order, the last with bucket.isLast().
#pragma once

#include <torch/csrc/distributed/c10d/comm.hpp>

#include <cstdint>

namespace runner {

/// What a hook started for one bucket.
struct CommLaunch {
  /// Completes with the mean of the bucket over the ranks: a tensor shaped
  /// and typed like bucket.getBuffer() (or a list whose first element is
  /// one, as ProcessGroup::allreduce's future holds). It may complete with
  /// an error, which fails the step.
  c10::intrusive_ptr<c10::ivalue::Future> future;
  /// The payload this rank contributes to the collectives it starts for the
  /// bucket, in bytes: the sum of the sizes of the tensors it allreduces
  /// (16 MiB of fp32 gradients sent as fp16 are 8 MiB). The host reports it
  /// per step, with the compression ratio (bucket bytes / payload) and a
  /// ring-allreduce estimate of the bytes on the wire (2 (n-1)/n payload).
  std::int64_t payload_bytes = 0;
};

/// A gradient communication hook. One instance serves one run (one rank).
class CommHook {
 public:
  virtual ~CommHook() = default;
  /// Starts reducing `bucket` over `group` and returns without waiting.
  /// bucket.getBuffer() is the flat gradient buffer (on the run's device),
  /// which the hook may modify in place (DDP's hooks divide it by the group
  /// size first); getIndex() is stable across steps, getParameters() and
  /// getGradients() describe what the buffer holds.
  virtual CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>& group) = 0;
};

}  // namespace runner
