// The CPU memory tracker (runner/training/memory.hpp): it counts the bytes of
// each CPU storage while it lives, wherever it is freed, keeps the peak until
// it is reset, serves the raw interface oneDNN uses, and hands out blocks as
// aligned as the allocator it wraps. The CUDA peak's errors where it cannot
// be measured; its reading on a GPU (label gpu) is in cuda_memory_test.
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runner/training/memory.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace mem = runner::training::cpu_memory;

// The tracker must wrap the allocator before the process's first tensor.
class InstallTracker : public ::testing::Environment {
 public:
  void SetUp() override { mem::install(); }
};
const auto* const kTracker = ::testing::AddGlobalTestEnvironment(new InstallTracker);

TEST(CpuMemoryTracker, InstallingTwiceKeepsOneTracker) {
  ASSERT_TRUE(mem::installed());
  c10::Allocator* const tracker = c10::GetCPUAllocator();
  mem::install();
  EXPECT_EQ(c10::GetCPUAllocator(), tracker);
  EXPECT_NE(tracker, c10::GetDefaultCPUAllocator());
}

TEST(CpuMemoryTracker, CountsAStorageOfKnownSizeWhileItLives) {
  const std::int64_t before = mem::current_bytes();
  const std::int64_t allocations = mem::allocations();
  {
    const torch::Tensor t = torch::empty({1000}, torch::kFloat);
    EXPECT_EQ(mem::current_bytes(), before + 4000);
    EXPECT_EQ(mem::allocations(), allocations + 1);
    EXPECT_GE(mem::peak_bytes(), before + 4000);
    // A view shares the storage: nothing more is allocated.
    const torch::Tensor view = t.view({10, 100});
    EXPECT_EQ(mem::current_bytes(), before + 4000);
  }
  EXPECT_EQ(mem::current_bytes(), before);
}

TEST(CpuMemoryTracker, CountsFreesOnOtherThreads) {
  const std::int64_t before = mem::current_bytes();
  torch::Tensor here = torch::empty({256}, torch::kDouble);
  EXPECT_EQ(mem::current_bytes(), before + 2048);
  std::thread([t = std::move(here)]() mutable { t.reset(); }).join();
  EXPECT_EQ(mem::current_bytes(), before);

  torch::Tensor there;
  std::thread([&there] { there = torch::empty({512}, torch::kByte); }).join();
  EXPECT_EQ(mem::current_bytes(), before + 512);
  there.reset();
  EXPECT_EQ(mem::current_bytes(), before);

  // Many threads allocating and freeing at once: no update is lost.
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([] {
      for (int j = 0; j < 2000; ++j) {
        const torch::Tensor a = torch::empty({j % 97 + 1}, torch::kFloat);
        const torch::Tensor b = torch::empty({j % 13 + 1}, torch::kFloat);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mem::current_bytes(), before);
}

TEST(CpuMemoryTracker, KeepsThePeakUntilItIsReset) {
  const std::int64_t before = mem::current_bytes();
  mem::reset_peak();
  EXPECT_EQ(mem::peak_bytes(), before);
  {
    const torch::Tensor big = torch::empty({1 << 18}, torch::kFloat);  // 1 MiB
    const torch::Tensor small = torch::empty({16}, torch::kFloat);
  }
  EXPECT_EQ(mem::current_bytes(), before);
  EXPECT_EQ(mem::peak_bytes(), before + (1 << 20) + 64);
  {
    const torch::Tensor smaller = torch::empty({1000}, torch::kByte);
  }
  EXPECT_EQ(mem::peak_bytes(), before + (1 << 20) + 64) << "a lower high-water mark";
  mem::reset_peak();
  EXPECT_EQ(mem::peak_bytes(), before);
  {
    const torch::Tensor smaller = torch::empty({1000}, torch::kByte);
  }
  EXPECT_EQ(mem::peak_bytes(), before + 1000);
}

TEST(CpuMemoryTracker, ServesTheRawInterfaceAndKeepsTheAlignment) {
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);  // oneDNN (ideep) allocates through it
  const std::int64_t before = mem::current_bytes();
  std::vector<void*> blocks;
  for (const std::size_t size : {1, 7, 64, 1000, 1 << 20}) {
    void* p = allocator->raw_allocate(size);
    blocks.push_back(p);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % c10::gAlignment, 0u) << size;
  }
  EXPECT_EQ(mem::current_bytes(), before + 1 + 7 + 64 + 1000 + (1 << 20));
  for (void* p : blocks) allocator->raw_deallocate(p);
  EXPECT_EQ(mem::current_bytes(), before);

  // A tensor's data is as aligned as the wrapped allocator's (vectorised kernels rely on it).
  for (const std::int64_t n : {1, 3, 17, 1000}) {
    const torch::Tensor t = torch::empty({n}, torch::kFloat);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % c10::gAlignment, 0u) << n;
  }
}

TEST(CpuMemoryTracker, ClonesAndResizesAreCounted) {
  const std::int64_t before = mem::current_bytes();
  torch::Tensor t = torch::ones({100}, torch::kFloat);
  const torch::Tensor copy = t.clone();
  EXPECT_EQ(mem::current_bytes(), before + 800);
  t.resize_({1000});  // a new storage replaces the old one
  EXPECT_EQ(mem::current_bytes(), before + 4400);
  EXPECT_TRUE(torch::equal(t.narrow(0, 0, 100), copy));
}

#if !defined(__SANITIZE_ADDRESS__)
// (Skipped under AddressSanitizer: telling a foreign block from ours reads
// the bytes before it, which ASan reports as out of bounds.)
TEST(CpuMemoryTracker, AForeignRawBlockFreedThroughTheTrackerGoesToTheWrappedAllocator) {
  // What oneDNN does with a block it took before install(): free it through
  // whichever allocator is current.
  c10::Allocator* wrapped = c10::GetDefaultCPUAllocator();
  const std::int64_t before = mem::current_bytes();
  void* p = wrapped->raw_allocate(256);
  c10::GetCPUAllocator()->raw_deallocate(p);
  EXPECT_EQ(mem::current_bytes(), before);
}
#endif

TEST(CudaMemory, SaysWhyItCannotMeasureWithoutADevice) {
  namespace cuda = runner::training::cuda_memory;
  if (cuda::available()) GTEST_SKIP() << "a CUDA device is present (cuda_memory_test covers it)";
#ifdef RUNNER_WITH_CUDA
  const std::string expected = "no CUDA device is present: CUDA peak memory cannot be measured";
#else
  const std::string expected =
      "runner was built without CUDA: CUDA peak memory cannot be measured; build against a CUDA "
      "LibTorch with nvcc installed (docs/build.md)";
#endif
  EXPECT_THROW_MSG(cuda::reset_peak(0), std::runtime_error, expected);
  EXPECT_THROW_MSG((void)cuda::peak_bytes(0), std::runtime_error, expected);
  EXPECT_THROW_MSG((void)cuda::current_bytes(0), std::runtime_error, expected);
}

}  // namespace
