// Gradient averaging for data-parallel training: DDP's Reducer or after backward (reducer.hpp).
#include "runner/engine/reducer.hpp"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/utils.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <unordered_map>

#include "runner/comm_hook.hpp"
#include "runner/common/error.hpp"

namespace runner {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The tensor a hook's future completed with: a tensor, or a list whose first
// element is one (what ProcessGroup::allreduce's future holds).
at::Tensor result_tensor(const c10::IValue& value) {
  if (value.isTensor()) return value.toTensor();
  if (value.isTensorList()) {
    const auto list = value.toTensorVector();
    if (!list.empty()) return list.front();
  }
  throw Error("the comm hook's future completed with " + value.tagKind() +
                  ", not the reduced bucket",
              "a comm hook's future must hold a tensor (or a list of tensors, the first "
              "being the bucket's mean)",
              ErrorKind::run);
}

// What the hooks of one step did, written from the autograd thread (launch)
// and the communication threads (completion).
struct Traffic {
  std::atomic<std::int64_t> buckets{0}, bucket_bytes{0}, payload_bytes{0};
  std::atomic<std::int64_t> first_launch_ns{-1}, last_done_ns{-1};

  void launched(std::int64_t at_ns, std::int64_t bytes, std::int64_t payload) {
    std::int64_t none = -1;
    first_launch_ns.compare_exchange_strong(none, at_ns);
    buckets += 1;
    bucket_bytes += bytes;
    payload_bytes += payload;
  }
  void done(std::int64_t at_ns) {
    std::int64_t seen = last_done_ns.load();
    while (seen < at_ns && !last_done_ns.compare_exchange_weak(seen, at_ns)) {
    }
  }
  CommStep take() {
    CommStep step;
    step.buckets = buckets.exchange(0);
    step.bucket_bytes = bucket_bytes.exchange(0);
    step.payload_bytes = payload_bytes.exchange(0);
    const std::int64_t first = first_launch_ns.exchange(-1), last = last_done_ns.exchange(-1);
    if (first >= 0 && last >= first) step.span_ns = static_cast<double>(last - first);
    return step;
  }
};

void check_size(const at::Tensor& reduced, std::int64_t expected, std::size_t index) {
  if (reduced.numel() != expected)
    throw Error("the comm hook returned a tensor of " + std::to_string(reduced.numel()) +
                    " elements for bucket " + std::to_string(index) + " of " +
                    std::to_string(expected) + " elements",
                "a comm hook's future must hold the reduced bucket, shaped like its buffer",
                ErrorKind::run);
}

CommLaunch launch(CommHook& hook, c10d::GradBucket& bucket,
                  const c10::intrusive_ptr<c10d::ProcessGroup>& group, Traffic& traffic) {
  const at::Tensor& buffer = bucket.getBuffer();
  const std::int64_t bytes = buffer.numel() * static_cast<std::int64_t>(buffer.element_size());
  const std::int64_t at_ns = now_ns();
  CommLaunch started = hook.run(bucket, group);
  if (!started.future)
    throw Error("the comm hook returned no future for bucket " +
                    std::to_string(bucket.getIndex()),
                "a comm hook must return the future of its collectives (CommLaunch::future)",
                ErrorKind::run);
  traffic.launched(at_ns, bytes, started.payload_bytes);
  return started;
}

// The run's hook as DDP's comm hook interface, with the accounting around it.
class ReducerHook final : public c10d::CommHookInterface {
 public:
  ReducerHook(CommHook& hook, c10::intrusive_ptr<c10d::ProcessGroup> group,
              std::shared_ptr<Traffic> traffic, const std::function<void()>& computed)
      : hook_(hook), group_(std::move(group)), traffic_(std::move(traffic)), computed_(computed) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    // The last bucket is handed over once every gradient is computed: from
    // here on, backward only communicates.
    if (bucket.isLast() && computed_) computed_();
    const std::int64_t expected = bucket.getBuffer().numel();
    const std::size_t index = bucket.getIndex();
    CommLaunch started = launch(hook_, bucket, group_, *traffic_);
    // Done: the time, and the result checked before the Reducer cuts it up.
    return started.future->then(
        [traffic = traffic_, expected, index](c10::ivalue::Future& done) {
          traffic->done(now_ns());
          at::Tensor reduced = result_tensor(done.value());
          check_size(reduced, expected, index);
          return c10::IValue(reduced);
        },
        c10::TensorType::get());
  }

  at::Tensor parseHookResult(const c10::IValue& result) override { return result_tensor(result); }

 private:
  CommHook& hook_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<Traffic> traffic_;
  const std::function<void()>& computed_;  // the GradientSync's, which owns the Reducer
};

// Buffers are synchronised the way DDP does it: before the first forward
// after a synchronised one (with micro-batches, once per optimizer step).
class BufferSync {
 public:
  BufferSync(std::vector<torch::Tensor> buffers, c10::intrusive_ptr<c10d::ProcessGroup> group,
             bool enabled)
      : buffers_(std::move(buffers)), group_(std::move(group)), enabled_(enabled) {}
  void before_forward(bool sync) {
    if (enabled_ && !buffers_.empty() && previous_synced_) broadcast_from_rank0(buffers_, group_);
    previous_synced_ = sync;
  }

 private:
  std::vector<torch::Tensor> buffers_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  bool enabled_;
  bool previous_synced_ = true;
};

std::vector<std::vector<std::size_t>> layout_of(const std::vector<c10d::GradBucket>& buckets,
                                                const std::vector<torch::Tensor>& parameters) {
  std::unordered_map<const void*, std::size_t> index;
  for (std::size_t i = 0; i < parameters.size(); ++i)
    index.emplace(parameters[i].unsafeGetTensorImpl(), i);
  std::vector<std::vector<std::size_t>> out;
  for (const auto& bucket : buckets) {
    std::vector<std::size_t> members;
    for (const auto& p : bucket.getParameters()) members.push_back(index.at(p.unsafeGetTensorImpl()));
    out.push_back(std::move(members));
  }
  return out;
}

class DdpSync final : public GradientSync {
 public:
  DdpSync(const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters,
          const std::vector<torch::Tensor>& buffers, c10::intrusive_ptr<c10d::ProcessGroup> group,
          CommHook& hook, const SyncOptions& options)
      : options_(options), buffers_(buffers, group, options.broadcast_buffers) {
    std::unordered_map<std::size_t, std::string> names;
    for (const auto& [name, p] : named_parameters) {
      names.emplace(parameters_.size(), name);
      parameters_.push_back(p);
    }
    const std::vector<bool> sparse(parameters_.size(), false);
    // DDP's initial bucketing: one bucket when the gradients' order will be
    // learnt in the first step (rebuilt afterwards), else a small first
    // bucket and bucket_bytes for the others, in reverse parameter order.
    std::vector<std::size_t> limits;
    const auto cap = static_cast<std::size_t>(options.bucket_bytes);
    const auto first = static_cast<std::size_t>(options.first_bucket_bytes);
    if (options.static_graph || !options.find_unused_parameters) {
      limits = {std::numeric_limits<std::size_t>::max()};
    } else if (first < cap) {
      limits = {first, cap};
    } else {
      limits = {cap};
    }
    auto [indices, per_bucket_limits] =
        c10d::compute_bucket_assignment_by_size(parameters_, limits, sparse);
    std::reverse(indices.begin(), indices.end());
    reducer_ = std::make_unique<c10d::Reducer>(
        parameters_, std::move(indices), group, sparse, options.bucket_bytes,
        options.find_unused_parameters, options.gradient_as_bucket_view, std::move(names),
        options.first_bucket_bytes, /*skip_all_reduce_unused_params=*/false,
        /*use_python_reducer=*/false, /*bucket_bytes_cap_list=*/std::vector<std::int64_t>{});
    if (options.static_graph) reducer_->set_static_graph();
    reducer_->register_comm_hook(
        std::make_unique<ReducerHook>(hook, std::move(group), traffic_, computed_));
  }

  void before_forward(bool sync) override {
    // DDP's _pre_forward: prepare (synchronised steps), rebuild the buckets
    // in the order of the first step's gradients (once), sync the buffers.
    if (sync) reducer_->prepare_for_forward();
    static_cast<void>(reducer_->rebuild_buckets());
    buffers_.before_forward(sync);
  }

  void before_backward(const torch::Tensor& loss, bool sync) override {
    if (!sync) return;  // no_sync: the Reducer's hooks do nothing in this backward
    if (options_.find_unused_parameters && !options_.static_graph) {
      reducer_->prepare_for_backward({loss});
    } else {
      reducer_->prepare_for_backward({});
    }
  }

  void after_backward(bool) override {}  // the Reducer finished inside backward

  CommStep take_step() override { return traffic_->take(); }

  [[nodiscard]] std::size_t bucket_count() const override {
    return reducer_->get_grad_buckets(/*return_zero_tensors=*/true).size();
  }
  [[nodiscard]] std::vector<std::vector<std::size_t>> layout() const override {
    return layout_of(reducer_->get_grad_buckets(true), parameters_);
  }
  [[nodiscard]] bool gradients_are_bucket_views() const override {
    return options_.gradient_as_bucket_view;
  }

 private:
  SyncOptions options_;
  std::vector<torch::Tensor> parameters_;
  BufferSync buffers_;
  std::shared_ptr<Traffic> traffic_ = std::make_shared<Traffic>();
  std::unique_ptr<c10d::Reducer> reducer_;
};

// After backward: copy into flat buckets, reduce each through the hook and
// wait for it, copy back.
class AfterBackwardSync final : public GradientSync {
 public:
  AfterBackwardSync(const std::vector<torch::Tensor>& parameters,
                    const std::vector<torch::Tensor>& buffers,
                    c10::intrusive_ptr<c10d::ProcessGroup> group, CommHook& hook,
                    const SyncOptions& options)
      : parameters_(parameters), group_(std::move(group)), hook_(hook),
        buffers_(buffers, group_, options.broadcast_buffers) {
    // Reverse order, as backward produces gradients; a bucket holds one dtype
    // and device; a parameter larger than the cap gets a bucket of its own.
    Bucket current;
    std::int64_t bytes = 0, elements = 0;
    auto close = [&] {
      if (current.members.empty()) return;
      const auto& first = parameters_[current.members.front()];
      current.flat = torch::empty({elements}, first.options().requires_grad(false));
      for (std::size_t k = 0; k < current.members.size(); ++k) {
        const auto& p = parameters_[current.members[k]];
        current.slices.push_back(
            current.flat.narrow(0, static_cast<std::int64_t>(current.offsets[k]), p.numel())
                .view(p.sizes()));
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
        if (bytes + size > options.bucket_bytes || first.scalar_type() != p.scalar_type() ||
            first.device() != p.device())
          close();
      }
      current.members.push_back(i);
      current.offsets.push_back(static_cast<std::size_t>(elements));
      current.lengths.push_back(static_cast<std::size_t>(p.numel()));
      elements += p.numel();
      bytes += size;
    }
    close();
  }

  void before_forward(bool sync) override { buffers_.before_forward(sync); }
  void before_backward(const torch::Tensor&, bool) override {}

  void after_backward(bool sync) override {
    if (!sync) return;
    torch::NoGradGuard no_grad;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      for (std::size_t k = 0; k < bucket.members.size(); ++k) {
        const auto& grad = parameters_[bucket.members[k]].grad();
        if (grad.defined()) {
          bucket.slices[k].copy_(grad);
        } else {
          bucket.slices[k].zero_();  // no gradient counts as zero
        }
      }
      std::vector<c10::IntArrayRef> sizes;
      std::vector<at::Tensor> members;
      for (std::size_t i : bucket.members) {
        sizes.push_back(parameters_[i].sizes());
        members.push_back(parameters_[i]);
      }
      c10d::GradBucket grad_bucket(b, buckets_.size(), bucket.flat, bucket.offsets,
                                   bucket.lengths, std::move(sizes), std::move(members),
                                   std::nullopt);
      const CommLaunch started = launch(hook_, grad_bucket, group_, traffic_);
      started.future->wait();
      const at::Tensor reduced = result_tensor(started.future->value());
      check_size(reduced, bucket.flat.numel(), b);
      const bool in_place = reduced.data_ptr() == bucket.flat.data_ptr();
      const at::Tensor flat = in_place ? bucket.flat : reduced.reshape({-1});
      for (std::size_t k = 0; k < bucket.members.size(); ++k) {
        torch::Tensor p = parameters_[bucket.members[k]];
        const auto slice =
            in_place ? bucket.slices[k]
                     : flat.narrow(0, static_cast<std::int64_t>(bucket.offsets[k]), p.numel())
                           .view(p.sizes());
        if (p.grad().defined()) {
          p.mutable_grad().copy_(slice);
        } else {
          p.mutable_grad() = slice.clone();
        }
      }
    }
    traffic_.done(now_ns());
  }

  CommStep take_step() override { return traffic_.take(); }
  [[nodiscard]] std::size_t bucket_count() const override { return buckets_.size(); }
  [[nodiscard]] std::vector<std::vector<std::size_t>> layout() const override {
    std::vector<std::vector<std::size_t>> out;
    for (const auto& b : buckets_) out.push_back(b.members);
    return out;
  }

 private:
  struct Bucket {
    std::vector<std::size_t> members;   // indices into parameters_
    std::vector<std::size_t> offsets;   // element offset of each member in `flat`
    std::vector<std::size_t> lengths;   // its element count
    torch::Tensor flat;
    std::vector<torch::Tensor> slices;  // views of `flat` shaped like each member, made once
  };
  std::vector<torch::Tensor> parameters_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  CommHook& hook_;
  BufferSync buffers_;
  std::vector<Bucket> buckets_;
  Traffic traffic_;
};

}  // namespace

void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors,
                          const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> detached;
  for (const auto& t : tensors) detached.push_back(t.detach());
  // DDP's own sync (_sync_module_states, _sync_buffers): rank 0's tensors,
  // flattened into buffers of at most 250 MiB per broadcast.
  constexpr std::size_t kBroadcastBucketBytes = 250 * 1024 * 1024;
  c10d::broadcast_coalesced(group, detached, kBroadcastBucketBytes, /*rank=*/0);
}

std::unique_ptr<GradientSync> make_ddp_sync(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters,
    const std::vector<torch::Tensor>& buffers, c10::intrusive_ptr<c10d::ProcessGroup> group,
    CommHook& hook, const SyncOptions& options) {
  return std::make_unique<DdpSync>(named_parameters, buffers, std::move(group), hook, options);
}

std::unique_ptr<GradientSync> make_after_backward_sync(
    const std::vector<torch::Tensor>& parameters, const std::vector<torch::Tensor>& buffers,
    c10::intrusive_ptr<c10d::ProcessGroup> group, CommHook& hook, const SyncOptions& options) {
  return std::make_unique<AfterBackwardSync>(parameters, buffers, std::move(group), hook,
                                             options);
}

}  // namespace runner
