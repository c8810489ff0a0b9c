// Comm hooks `allreduce` and `compressed_allreduce`: the mean of a gradient
// bucket over the process group, as DDP's default hook and its fp16/bf16
// compression hook do.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <runner/sdk.hpp>

#include <vector>

namespace {

// Bytes one rank sends in a ring allreduce of `bytes`: reduce-scatter plus
// all-gather, each (n - 1) / n of the buffer.
std::int64_t ring_bytes(std::int64_t bytes, int world) {
  return world <= 1 ? 0 : 2 * bytes * (world - 1) / world;
}

// Sums `tensor` over the group in place and divides by the group size.
void mean_in_place(torch::Tensor& tensor, c10d::ProcessGroup& group) {
  std::vector<at::Tensor> tensors{tensor};
  group.allreduce(tensors)->wait();
  tensor.div_(group.getSize());
}

class AllReduce final : public runner::CommHook {
 public:
  runner::CommResult reduce(const torch::Tensor& bucket, std::int64_t,
                            c10d::ProcessGroup& group) override {
    torch::Tensor reduced = bucket;  // the host lets hooks work in place
    mean_in_place(reduced, group);
    return {reduced, ring_bytes(bucket.numel() * bucket.element_size(), group.getSize())};
  }
};

struct CompressedOptions {
  std::string dtype = "fp16";
};

class CompressedAllReduce final : public runner::CommHook {
 public:
  explicit CompressedAllReduce(const CompressedOptions& options)
      : wire_(options.dtype == "bf16" ? torch::kBFloat16 : torch::kHalf) {}

  runner::CommResult reduce(const torch::Tensor& bucket, std::int64_t,
                            c10d::ProcessGroup& group) override {
    torch::Tensor compressed = bucket.to(wire_);
    // Divide before summing, as DDP's fp16 hook does, so fp16 does not overflow.
    compressed.div_(group.getSize());
    std::vector<at::Tensor> tensors{compressed};
    group.allreduce(tensors)->wait();
    return {compressed.to(bucket.scalar_type()),
            ring_bytes(compressed.numel() * compressed.element_size(), group.getSize())};
  }

 private:
  torch::ScalarType wire_;
};

void register_plugins(runner::Registrar& registrar) {
  registrar.add_comm_hook("allreduce", "mean of each gradient bucket over the ranks (DDP's default)",
                          runner::OptionSchema{},
                          [](const runner::Options&) { return std::make_unique<AllReduce>(); });
  runner::OptionBinder<CompressedOptions> compressed;
  compressed.field("dtype", &CompressedOptions::dtype, "precision on the wire")
      .one_of({"fp16", "bf16"});
  registrar.add_comm_hook(
      "compressed_allreduce",
      "mean over the ranks sent in half precision (DDP's fp16/bf16 compression hook)",
      compressed, [](const CompressedOptions& o) { return std::make_unique<CompressedAllReduce>(o); });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
