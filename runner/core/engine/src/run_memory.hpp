// A run's memory figures (docs/measurement.md, "Memory"), kept apart so that
// the data a loader holds never passes for the model's memory:
//
// - data_set_bytes: the tensor bytes the loaders (train split, and the eval
//   split with [eval]) hold once built;
// - peak_*_setup_bytes: the peak above the run's start until its first step
//   (building the loaders and the model, loading and checking weights);
// - peak_cpu_alloc_bytes, peak_cuda_allocated_bytes: the peak over the steps
//   after warm-up and profiled steps, less the baseline: the bytes live when
//   the run started plus the loaders' data. What is left is the model's run:
//   weights, optimizer state, activations, workspace and the batches in
//   flight. Held-out evaluations between steps are left out.
//
// The same logic for the CPU (the tracker of runner/training/memory.hpp, when
// installed) and a CUDA device (the caching allocator's statistics).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runner/store/store.hpp"

namespace runner {

class RunMemory {
 public:
  /// Starts counting the CPU, when the tracker is installed.
  RunMemory();

  /// Starts counting CUDA device `index` as well (its peak restarts now).
  void add_cuda(int index);

  /// Runs `build` (which makes a loader) and counts the bytes it leaves live
  /// as the data set's. Nothing else may allocate meanwhile (no pipeline
  /// worker running yet), or its bytes are counted too.
  template <typename Build>
  void count_data(Build&& build) {
    const Bytes before = live();
    build();
    add_data(before);
  }

  /// The setup's peak ends here; the steps' peak starts. Called once, before the first step.
  void begin_steps();

  /// Forgets the steps' peak so far: called after each warm-up or profiled
  /// step, so the peak covers the measured steps only.
  void restart_peak();

  /// What follows, until resume(), is left out of the steps' peak (a held-out evaluation).
  void pause();

  /// Counts again after pause().
  void resume();

  /// Appends data_set_bytes and the peaks (those of the steps once begin_steps() ran).
  void add_metrics(std::vector<store::Metric>& metrics);

 private:
  // Per device: CPU, then the CUDA device when counted.
  struct Bytes {
    std::int64_t cpu = 0;
    std::int64_t cuda = 0;
  };
  struct Counter {
    bool on = false;
    std::int64_t start = 0;       // live bytes when counting began
    std::int64_t data = 0;        // the loaders' bytes
    std::int64_t setup_peak = 0;  // the highest live bytes before the first step
    std::int64_t steps_peak = 0;  // the highest live bytes over the steps, outside pauses
  };
  [[nodiscard]] Bytes live() const;
  void add_data(const Bytes& before);
  [[nodiscard]] std::int64_t current(bool cuda) const;
  [[nodiscard]] std::int64_t peak(bool cuda) const;
  void reset(bool cuda);
  Counter& counter(bool cuda) { return cuda ? cuda_ : cpu_; }

  Counter cpu_, cuda_;
  std::optional<int> cuda_index_;
  bool steps_begun_ = false;
  bool paused_ = false;
};

}  // namespace runner
