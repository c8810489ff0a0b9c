// Comm hooks `allreduce`, `fp16_compress` and `bf16_compress`: the mean of a
// gradient bucket over the process group, as DDP's default hook and its
// fp16/bf16 compression hooks compute it (divide by the group size, then
// sum; the compressed ones on a half-precision copy of the bucket, so that
// the sum cannot overflow fp16, decompressed into the bucket when done).
#include <runner/comm_hook.hpp>
#include <runner/sdk.hpp>

#include <vector>

namespace {

// The tensor a completed ProcessGroup::allreduce future holds.
at::Tensor first_tensor(const c10::IValue& value) {
  return value.isTensor() ? value.toTensor() : value.toTensorVector().at(0);
}

class AllReduce final : public runner::CommHook {
 public:
  runner::CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>& group) override {
    at::Tensor& buffer = bucket.getBufferRef();
    buffer.div_(group->getSize());
    std::vector<at::Tensor> tensors{buffer};
    return {group->allreduce(tensors)->getFuture(), buffer.numel() * buffer.element_size()};
  }
};

class CompressedAllReduce final : public runner::CommHook {
 public:
  explicit CompressedAllReduce(at::ScalarType wire) : wire_(wire) {}

  runner::CommLaunch run(c10d::GradBucket& bucket,
                         const c10::intrusive_ptr<c10d::ProcessGroup>& group) override {
    at::Tensor buffer = bucket.getBuffer();
    // Divide before summing: fp16 would overflow on a sum of large gradients.
    std::vector<at::Tensor> tensors{buffer.to(wire_).div_(group->getSize())};
    const std::int64_t payload = tensors[0].numel() * tensors[0].element_size();
    auto sent = group->allreduce(tensors)->getFuture();
    // Decompressed into the bucket's own buffer, as DDP's hooks do.
    auto decompressed = sent->then(
        [buffer](c10::ivalue::Future& done) {
          at::Tensor into = buffer;
          into.copy_(first_tensor(done.value()));
          return c10::IValue(into);
        },
        c10::TensorType::get());
    return {decompressed, payload};
  }

 private:
  at::ScalarType wire_;
};

void register_plugins(runner::Registrar& registrar) {
  registrar.add_comm_hook("allreduce", "mean of each gradient bucket over the ranks (DDP's default)",
                          runner::OptionSchema{},
                          [](const runner::Options&) { return std::make_unique<AllReduce>(); });
  registrar.add_comm_hook(
      "fp16_compress",
      "mean over the ranks sent in fp16, half the bytes (DDP's fp16_compress_hook)",
      runner::OptionSchema{},
      [](const runner::Options&) { return std::make_unique<CompressedAllReduce>(at::kHalf); });
  registrar.add_comm_hook(
      "bf16_compress",
      "mean over the ranks sent in bf16, half the bytes (DDP's bf16_compress_hook)",
      runner::OptionSchema{},
      [](const runner::Options&) { return std::make_unique<CompressedAllReduce>(at::kBFloat16); });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
