// Peak memory of a run, on every device.
//
// CPU: a tracker wraps c10's CPU allocator (the one every CPU tensor's
// storage comes from) and counts the bytes of the storages it hands out and
// takes back. current_bytes() is the bytes of live CPU tensor storage
// allocated since install(); peak_bytes() the most there has been at once
// since the last reset_peak(). A free on any thread is counted (atomics).
// Counted: the size LibTorch asks for (a tensor's storage bytes, the
// scratch buffers of operators that allocate through c10, oneDNN's buffers
// through ideep's allocator hook). Not counted: what the allocator and malloc
// keep besides (glibc's arenas, freed memory not returned to the system), the
// process's own heap (LibTorch's and runner's C++ objects, the autograd graph's
// nodes), storages created before install() (their frees are ignored too),
// memory libraries take from malloc directly (BLAS and oneDNN workspaces,
// OpenMP stacks), and tensors wrapping foreign memory (from_blob).
//
// The tracker keeps the wrapped allocator's behaviour: each block comes from
// it and goes back through its own deleter; the tracker asks for 64 bytes
// more and hands out the address 64 bytes in (the wrapped allocator's
// alignment, up to 64, is kept; where it aligns large blocks to huge pages
// the data is 64 bytes past the page boundary).
//
// Install it before the process's first tensor operation: oneDNN frees its
// blocks through whichever allocator is current at the time, so a block it
// took before install() and gives back after reaches the tracker (which
// recognises foreign blocks by a tag before each of its own, and hands them to
// the wrapped allocator).
//
// CUDA: the caching allocator keeps its own statistics; cuda_memory reads
// and resets the peak of the bytes allocated to tensors on one device (its
// cached, unallocated blocks are not counted), as torch.cuda's
// max_memory_allocated and reset_peak_memory_stats do.
#pragma once

#include <cstdint>

namespace runner::training {

namespace cpu_memory {

/// Wraps the current CPU allocator with the tracker (once per process; later
/// calls do nothing). Throws std::runtime_error if another allocator with a
/// higher priority keeps the tracker from being installed.
void install();

/// True once install() has succeeded.
[[nodiscard]] bool installed();

/// Bytes of CPU tensor storage allocated through the tracker and not yet freed.
[[nodiscard]] std::int64_t current_bytes();

/// The largest current_bytes() since the last reset_peak() (or install()).
[[nodiscard]] std::int64_t peak_bytes();

/// Starts a new peak from current_bytes(). A peak reached by another thread
/// while this runs may be lost; reset between steps, not during one.
void reset_peak();

/// Allocations counted since install() (zero-byte requests included).
[[nodiscard]] std::int64_t allocations();

}  // namespace cpu_memory

namespace cuda_memory {

/// True when runner was built with CUDA and a CUDA device is present.
[[nodiscard]] bool available();

/// Restarts the caching allocator's peak statistics of `device`.
/// Throws std::runtime_error when !available() or the device does not exist.
void reset_peak(int device);

/// The most bytes allocated to tensors on `device` at once since the last
/// reset_peak(device) (or the process's start).
[[nodiscard]] std::int64_t peak_bytes(int device);

/// Bytes allocated to tensors on `device` now.
[[nodiscard]] std::int64_t current_bytes(int device);

}  // namespace cuda_memory

}  // namespace runner::training
