// Probe: the Gloo types runner touches have the layout libtorch_cpu's Gloo
// expects, although runner compiles against Debian's (older) Gloo headers.
//
// runner creates a Gloo process group in exactly one place
// (runner/core/engine/src/process_group.cpp) and touches only:
//   - c10d::ProcessGroupGloo::Options: created by the header's inline
//     create(), filled by runner (devices, threads), read by libtorch_cpu's
//     constructor;
//   - the transport device, from libtorch_cpu's createDeviceForHostname(),
//     held as an opaque std::shared_ptr<gloo::transport::Device> and never
//     dereferenced;
//   - c10d::ProcessGroupGloo itself, allocated by runner's translation unit
//     (sizeof from Debian's headers) and constructed by libtorch_cpu (its own
//     layout), then used only through c10d::Backend / c10d::ProcessGroup.
// Each is checked here so that a mismatch fails loudly instead of corrupting
// memory:
//   1. ProcessGroupGloo is constructed in a buffer of the size runner's
//      headers give it followed by guard bytes; the constructor, the worker
//      threads and the destructor (all libtorch_cpu's code) must leave every
//      guard byte as it was: the object libtorch builds fits in what runner
//      allocates.
//   2. The Options fields runner writes are the ones libtorch reads: the
//      group starts exactly `threads` worker threads (counted in
//      /proc/self/task), uses the device runner put in `devices` (a
//      collective over it works), and keeps the timeout runner set.
//   3. The group answers through its vtable as libtorch's does (backend name,
//      rank, size), and an allreduce and a barrier on a world of one complete.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "probe_common.hpp"

namespace {

constexpr std::string_view kProbe = "c10d_gloo_layout";
constexpr std::chrono::milliseconds kTimeout{10000};
constexpr std::size_t kGuardBytes = 4096;
constexpr unsigned char kGuard = 0xA5;

int thread_count() {
  std::error_code ec;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    static_cast<void>(entry);
    ++n;
  }
  return n;
}

std::size_t first_changed_guard(const unsigned char* guard) {
  for (std::size_t i = 0; i < kGuardBytes; ++i)
    if (guard[i] != kGuard) return i;
  return kGuardBytes;
}

void check(const std::string& store_path) {
  using c10d::ProcessGroupGloo;
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, 1);
  store->setTimeout(kTimeout);
  auto options = ProcessGroupGloo::Options::create(kTimeout);
  options->devices.push_back(ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  constexpr int kThreads = 3;
  options->threads = kThreads;

  // 1. Constructed in runner's sizeof, followed by guard bytes.
  const std::size_t size = sizeof(ProcessGroupGloo);
  const std::size_t align = alignof(ProcessGroupGloo);
  probe::say(kProbe, "sizeof(ProcessGroupGloo) with these headers: " + std::to_string(size) +
                         " bytes, alignof " + std::to_string(align));
  auto* raw = static_cast<unsigned char*>(
      ::operator new(size + kGuardBytes, std::align_val_t(align)));
  std::memset(raw, kGuard, size + kGuardBytes);
  const unsigned char* guard = raw + size;
  const int threads_before = thread_count();
  auto* group = new (raw) ProcessGroupGloo(store, 0, 1, options);
  // Collectives take references to the group: adopt it as an object that is
  // not heap-allocated (its reference count never reaches zero; the probe
  // destroys it itself).
  c10::intrusive_ptr<ProcessGroupGloo> owner =
      c10::intrusive_ptr<ProcessGroupGloo>::unsafe_adapt_non_heap_allocated(group, 1);
  std::size_t changed = first_changed_guard(guard);
  probe::expect(changed == kGuardBytes,
                "libtorch_cpu's ProcessGroupGloo constructor wrote " + std::to_string(changed) +
                    " byte(s) past the " + std::to_string(size) +
                    " bytes runner's headers allocate: the layouts differ");

  // 2. Options as libtorch read them.
  const int started = thread_count() - threads_before;
  probe::expect(started == kThreads, "the group started " + std::to_string(started) +
                                         " worker threads, not options->threads = " +
                                         std::to_string(kThreads) +
                                         ": libtorch reads Options at other offsets");
  probe::expect(group->getOptions()->timeout == kTimeout,
                "the group's timeout is not the one runner set");

  // 3. Through the vtable, and collectives over the device runner gave it.
  probe::expect(group->getBackendName() == "gloo", "unexpected backend " + group->getBackendName());
  probe::expect(group->getRank() == 0 && group->getSize() == 1, "wrong rank or size");
  std::vector<at::Tensor> tensors{at::full({16}, 2.0f)};
  probe::expect(group->allreduce(tensors)->wait(kTimeout), "allreduce wait() returned false");
  probe::expect(tensors[0].sum().item<float>() == 32.0f, "allreduce changed a world-of-one sum");
  probe::expect(group->barrier()->wait(kTimeout), "barrier wait() returned false");
  changed = first_changed_guard(guard);
  probe::expect(changed == kGuardBytes, "the group wrote past runner's allocation while working "
                                        "(guard byte " + std::to_string(changed) + ")");

  // The destructor (libtorch's) joins the workers; it must stay inside too.
  owner.reset();
  group->~ProcessGroupGloo();
  changed = first_changed_guard(guard);
  probe::expect(changed == kGuardBytes, "the destructor wrote past runner's allocation (guard "
                                        "byte " + std::to_string(changed) + ")");
  // The method can see a mismatch: the last 64 bytes of the object, taken
  // as guard bytes, must show the constructor's writes.
  std::memset(raw, kGuard, size + kGuardBytes);
  auto* again = new (raw) ProcessGroupGloo(store, 0, 1, options);
  bool seen = false;
  for (std::size_t i = size - 64; i < size; ++i) seen = seen || raw[i] != kGuard;
  again->~ProcessGroupGloo();
  probe::expect(seen, "the guard method saw no write in the object's last 64 bytes: it could "
                      "not see a layout mismatch either");
  ::operator delete(raw, std::align_val_t(align));
  probe::say(kProbe, "ProcessGroupGloo fits runner's allocation with " +
                         std::to_string(kGuardBytes) + " guard bytes untouched; Options read as "
                         "written (threads, devices, timeout)");
}

}  // namespace

int main() {
  const std::string store_path = (std::filesystem::temp_directory_path() /
                                  ("runner-gloo-layout-" + std::to_string(::getpid())))
                                     .string();
  try {
    check(store_path);
  } catch (const std::exception& e) {
    std::filesystem::remove(store_path);
    probe::fail(kProbe, e.what());
  }
  std::filesystem::remove(store_path);
  probe::say(kProbe, "OK");
  return 0;
}
