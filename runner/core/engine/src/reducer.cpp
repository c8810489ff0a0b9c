#include "runner/engine/reducer.hpp"

#include <torch/csrc/distributed/c10d/comm.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/utils.h>

#include <string>

#include "runner/comm_hook.hpp"
#include "runner/common/error.hpp"

namespace runner {

void broadcast_parameters(const std::vector<torch::Tensor>& parameters,
                          c10d::ProcessGroup& group) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors;
  for (const auto& p : parameters) tensors.push_back(p.detach());
  // DDP's own start-of-training sync (_sync_module_states): rank 0's tensors,
  // flattened into buffers of at most 250 MiB per broadcast. The group is
  // always owned by an intrusive_ptr (make_process_group), so a new
  // reference to it is safe.
  constexpr std::size_t kBroadcastBucketBytes = 250 * 1024 * 1024;
  c10d::broadcast_coalesced(c10::intrusive_ptr<c10d::ProcessGroup>::reclaim_copy(&group), tensors,
                            kBroadcastBucketBytes, /*rank=*/0);
}

GradientReducer::GradientReducer(std::vector<torch::Tensor> parameters,
                                 std::int64_t bucket_bytes, CommHook& hook,
                                 c10d::ProcessGroup& group)
    : parameters_(std::move(parameters)), hook_(hook), group_(group) {
  // Reverse order: the last layers' gradients are ready first in backward.
  Bucket current;
  std::int64_t bytes = 0, elements = 0;
  auto close = [&] {
    if (current.members.empty()) return;
    const auto& first = parameters_[current.members.front()];
    current.flat = torch::empty({elements}, first.options().requires_grad(false));
    for (std::size_t k = 0; k < current.members.size(); ++k) {
      const auto& p = parameters_[current.members[k]];
      current.slices.push_back(
          current.flat.narrow(0, current.offsets[k], p.numel()).view(p.sizes()));
    }
    buckets_.push_back(std::move(current));
    current = Bucket{};
    bytes = elements = 0;
  };
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    const auto& p = parameters_[i];
    const std::int64_t size = p.numel() * static_cast<std::int64_t>(p.element_size());
    if (!current.members.empty()) {
      const auto& first = parameters_[current.members.front()];
      if (bytes + size > bucket_bytes || first.scalar_type() != p.scalar_type() ||
          first.device() != p.device())
        close();
    }
    current.members.push_back(i);
    current.offsets.push_back(elements);
    elements += p.numel();
    bytes += size;
  }
  close();
}

std::vector<std::vector<std::size_t>> GradientReducer::layout() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.members);
  return out;
}

std::int64_t GradientReducer::reduce() {
  torch::NoGradGuard no_grad;
  std::int64_t sent = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    for (std::size_t k = 0; k < bucket.members.size(); ++k) {
      const auto& grad = parameters_[bucket.members[k]].grad();
      if (grad.defined()) {
        bucket.slices[k].copy_(grad);
      } else {
        bucket.slices[k].zero_();
      }
    }
    const CommResult result = hook_.reduce(bucket.flat, static_cast<std::int64_t>(b), group_);
    if (!result.reduced.defined() || result.reduced.numel() != bucket.flat.numel())
      throw Error("the comm hook returned " +
                      (result.reduced.defined()
                           ? "a tensor of " + std::to_string(result.reduced.numel()) + " elements"
                           : std::string("no tensor")) +
                      " for bucket " + std::to_string(b) + " of " +
                      std::to_string(bucket.flat.numel()) + " elements",
                  "a comm hook must return the reduced bucket, same shape and dtype as its input",
                  ErrorKind::run);
    // An in-place hook (the usual case) leaves the result in `flat`, whose
    // views exist already; another tensor is cut up here.
    const bool in_place = result.reduced.data_ptr() == bucket.flat.data_ptr();
    const torch::Tensor reduced = in_place ? bucket.flat : result.reduced.reshape({-1});
    for (std::size_t k = 0; k < bucket.members.size(); ++k) {
      torch::Tensor p = parameters_[bucket.members[k]];
      const auto slice = in_place ? bucket.slices[k]
                                  : reduced.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(slice);
      } else {
        p.mutable_grad() = slice.clone();
      }
    }
    sent += result.bytes_on_wire;
  }
  return sent;
}

}  // namespace runner
