// Gradient averaging for data-parallel training.
//
// The default is PyTorch DDP's own engine, c10d::Reducer (make_ddp_sync):
// gradients land in flat buckets as backward computes them, and each bucket
// goes to the run's comm hook as soon as it is full, while backward goes on
// with earlier layers; at the end of backward the Reducer waits for the
// hooks' futures and writes the means into the gradients. The first step
// has one bucket (DDP's initial bucketing, since the gradients' order is not
// known yet); from the second step the buckets are rebuilt in the order the
// gradients came, the first first_bucket_bytes and the others bucket_bytes.
//
// [distributed] reducer = "after_backward" keeps runner's earlier design
// (make_after_backward_sync): after backward has finished, gradients are
// copied into buckets of bucket_bytes (reverse parameter order), and each
// bucket is handed to the hook and waited for. Nothing overlaps; it is kept
// to measure what the overlap buys.
#pragma once

#include <torch/types.h>

#include <c10/util/intrusive_ptr.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace runner {

class CommHook;

/// Sets every rank's `tensors` to rank 0's values with c10d's
/// broadcast_coalesced, as DDP does for parameters before the first step
/// and for buffers before every forward.
void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors,
                          const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Communication of one optimizer step (its synchronised micro-batch).
struct CommStep {
  std::int64_t buckets = 0;        ///< buckets handed to the hook
  std::int64_t bucket_bytes = 0;   ///< gradient bytes in them
  std::int64_t payload_bytes = 0;  ///< bytes the hook allreduced for them (its report)
  /// From the first bucket handed to the hook to the last future completed
  /// (or to the last gradient written back when nothing completed later), ns;
  /// -1 when the step synchronised nothing.
  double span_ns = -1;
};

/// What the options of [distributed] set for the gradient synchronisation.
struct SyncOptions {
  std::int64_t bucket_bytes = 25LL << 20;       ///< DDP's bucket_cap_mb
  std::int64_t first_bucket_bytes = 1LL << 20;  ///< DDP's first bucket (reducer "ddp" only)
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  bool broadcast_buffers = true;  ///< rank 0's buffers before every forward (DDP's default)
};

/// One rank's gradient synchronisation. The step protocol, per micro-batch:
/// before_forward(sync), forward, before_backward(loss, sync), backward,
/// after_backward(sync); `sync` is true on the step's last micro-batch only
/// (DDP's no_sync on the others: their gradients accumulate locally).
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void before_forward(bool sync) = 0;
  virtual void before_backward(const torch::Tensor& loss, bool sync) = 0;
  virtual void after_backward(bool sync) = 0;
  /// The step's communication, and resets it for the next step.
  virtual CommStep take_step() = 0;
  /// Buckets of the current layout.
  [[nodiscard]] virtual std::size_t bucket_count() const = 0;
  /// Parameter indices of each bucket, in bucket order (for tests and docs).
  [[nodiscard]] virtual std::vector<std::vector<std::size_t>> layout() const = 0;
  /// True when gradients are views of the buckets: zero_grad must then zero
  /// them in place rather than drop them (LibTorch's default sets them to none).
  [[nodiscard]] virtual bool gradients_are_bucket_views() const { return false; }
  /// Called once per synchronised backward when its last bucket is handed to
  /// the hook, i.e. when every gradient has been computed (reducer "ddp";
  /// from the autograd thread, while the caller waits in backward()). The
  /// rest of backward is communication that backward did not hide.
  void on_gradients_computed(std::function<void()> callback) { computed_ = std::move(callback); }

 protected:
  std::function<void()> computed_;
};

/// c10d::Reducer over `module`'s trainable parameters (named by
/// `names` in error messages). `hook` and `group` must outlive it.
[[nodiscard]] std::unique_ptr<GradientSync> make_ddp_sync(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters,
    const std::vector<torch::Tensor>& buffers, c10::intrusive_ptr<c10d::ProcessGroup> group,
    CommHook& hook, const SyncOptions& options);

/// The reduce-after-backward synchronisation (reducer "after_backward").
[[nodiscard]] std::unique_ptr<GradientSync> make_after_backward_sync(
    const std::vector<torch::Tensor>& parameters, const std::vector<torch::Tensor>& buffers,
    c10::intrusive_ptr<c10d::ProcessGroup> group, CommHook& hook, const SyncOptions& options);

}  // namespace runner
