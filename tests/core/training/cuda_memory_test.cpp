// The CUDA peak (runner/training/memory.hpp) on a GPU: a tensor of known size
// raises the caching allocator's peak of allocated bytes by its size, which
// stays after the tensor is freed until reset_peak(); a device that does not
// exist is an error naming the devices there are. Skipped without a device.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <cstdint>
#include <string>

#include "runner/training/memory.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace cuda = runner::training::cuda_memory;

TEST(CudaMemory, PeakOfAllocatedBytesOnADevice) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  cuda::reset_peak(0);
  const std::int64_t before = cuda::current_bytes(0);
  EXPECT_EQ(cuda::peak_bytes(0), before);
  {
    // 8 MiB: a multiple of the caching allocator's rounding, so exact.
    const torch::Tensor t = torch::empty({1 << 21}, torch::TensorOptions(torch::kCUDA));
    EXPECT_EQ(cuda::current_bytes(0), before + (8 << 20));
  }
  EXPECT_EQ(cuda::current_bytes(0), before);
  EXPECT_EQ(cuda::peak_bytes(0), before + (8 << 20));
  cuda::reset_peak(0);
  EXPECT_EQ(cuda::peak_bytes(0), before);
}

TEST(CudaMemory, ADeviceThatDoesNotExistIsAnError) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  const auto count = static_cast<int>(torch::cuda::device_count());
  EXPECT_THROW_MSG(cuda::reset_peak(count), std::runtime_error,
                   "CUDA device " + std::to_string(count) +
                       " does not exist; this machine has devices 0 to " +
                       std::to_string(count - 1));
}

}  // namespace
