// Peak memory of a run on every device (memory.hpp).
#include "runner/training/memory.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

namespace runner::training {

namespace cpu_memory {

namespace {

// Before every block the tracker hands out: what to give back to the wrapped
// allocator, and how many bytes to uncount.
struct Header {
  void* context;
  c10::DeleterFnPtr deleter;
  std::size_t bytes;
  std::uintptr_t tag;  // the data address mixed with kTag: tells our blocks from foreign ones
};

constexpr std::uintptr_t kTag = 0x6d656d2d72756e72;  // "memrunr"

// The offset of the data in each block: the header rounded up to the
// alignment c10 guarantees, so the data stays as aligned as the block.
constexpr std::size_t kOffset = (sizeof(Header) + c10::gAlignment - 1) / c10::gAlignment *
                                c10::gAlignment;

// Namespace-scope atomics are constant-initialised and never destroyed:
// storages freed during static destruction still find them.
std::atomic<std::int64_t> g_current{0};
std::atomic<std::int64_t> g_peak{0};
std::atomic<std::int64_t> g_allocations{0};
std::atomic<bool> g_installed{false};
// The wrapped allocator's raw deleter, for foreign blocks freed through ours.
std::atomic<c10::DeleterFnPtr> g_wrapped_raw_deleter{nullptr};

void count_allocation(std::size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto n = static_cast<std::int64_t>(bytes);
  const std::int64_t now = g_current.fetch_add(n, std::memory_order_relaxed) + n;
  std::int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak &&
         !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

Header* header_of(void* data) {
  return reinterpret_cast<Header*>(static_cast<char*>(data) - kOffset);
}

// The deleter of every block the tracker hands out, and its raw deleter:
// context and data are the same address (what raw_allocate requires).
void delete_tracked(void* data) {
  if (data == nullptr) return;
  Header* header = header_of(data);
  if (header->tag != (reinterpret_cast<std::uintptr_t>(data) ^ kTag)) {
    // A block the wrapped allocator handed out through its raw interface
    // before install(), freed through the current allocator's raw interface.
    if (const c10::DeleterFnPtr wrapped = g_wrapped_raw_deleter.load()) wrapped(data);
    return;
  }
  g_current.fetch_sub(static_cast<std::int64_t>(header->bytes), std::memory_order_relaxed);
  if (header->deleter != nullptr) header->deleter(header->context);
}

class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(std::size_t n) override {
    if (n == 0) {
      count_allocation(0);
      return {nullptr, nullptr, &delete_tracked, c10::Device(c10::kCPU)};
    }
    if (n > std::numeric_limits<std::size_t>::max() - kOffset) throw std::bad_alloc();
    c10::DataPtr block = wrapped_->allocate(n + kOffset);
    char* base = static_cast<char*>(block.get());
    char* data = base + kOffset;
    const c10::DeleterFnPtr deleter = block.get_deleter();
    const c10::Device device = block.device();
    void* context = block.release_context();
    ::new (header_of(data))
        Header{context, deleter, n, reinterpret_cast<std::uintptr_t>(data) ^ kTag};
    count_allocation(n);
    return {data, data, &delete_tracked, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_tracked; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* wrapped_;
};

// The highest priority: a later SetCPUAllocator of lower priority cannot
// silently take the tracker out of the allocation path.
constexpr std::uint8_t kPriority = std::numeric_limits<std::uint8_t>::max();

}  // namespace

void install() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (g_installed.load()) return;
  c10::Allocator* wrapped = c10::GetCPUAllocator();
  // Never destroyed: storages freed during static destruction still reach it.
  auto* tracker = new TrackingAllocator(wrapped);
  g_wrapped_raw_deleter.store(wrapped->raw_deleter());
  c10::SetCPUAllocator(tracker, kPriority);
  if (c10::GetCPUAllocator() != tracker)
    throw std::runtime_error(
        "the CPU memory tracker could not be installed: another CPU allocator was set with "
        "a higher priority than 255; CPU peak memory cannot be measured in this process");
  g_installed.store(true);
}

bool installed() { return g_installed.load(); }

std::int64_t current_bytes() { return g_current.load(std::memory_order_relaxed); }

std::int64_t peak_bytes() { return g_peak.load(std::memory_order_relaxed); }

void reset_peak() { g_peak.store(g_current.load(std::memory_order_relaxed), std::memory_order_relaxed); }

std::int64_t allocations() { return g_allocations.load(std::memory_order_relaxed); }

}  // namespace cpu_memory

namespace cuda_memory {

#ifdef RUNNER_WITH_CUDA
namespace {

c10::DeviceIndex checked(int device) {
  const int count = c10::cuda::device_count();
  if (count == 0)
    throw std::runtime_error("no CUDA device is present: CUDA peak memory cannot be measured");
  if (device < 0 || device >= count)
    throw std::runtime_error("CUDA device " + std::to_string(device) + " does not exist; this " +
                             "machine has devices 0 to " + std::to_string(count - 1));
  return static_cast<c10::DeviceIndex>(device);
}

// Bytes allocated to tensors, over every pool of the device.
c10::CachingAllocator::Stat allocated(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(checked(device));
  return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}

}  // namespace

bool available() { return c10::cuda::device_count() > 0; }

void reset_peak(int device) { c10::cuda::CUDACachingAllocator::resetPeakStats(checked(device)); }

std::int64_t peak_bytes(int device) { return allocated(device).peak; }

std::int64_t current_bytes(int device) { return allocated(device).current; }

#else

namespace {

[[noreturn]] void no_cuda() {
  throw std::runtime_error(
      "runner was built without CUDA: CUDA peak memory cannot be measured; build against a "
      "CUDA LibTorch with nvcc installed (docs/build.md)");
}

}  // namespace

bool available() { return false; }

void reset_peak(int) { no_cuda(); }

std::int64_t peak_bytes(int) { no_cuda(); }

std::int64_t current_bytes(int) { no_cuda(); }

#endif

}  // namespace cuda_memory

}  // namespace runner::training
