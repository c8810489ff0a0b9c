// Per-step phase timing shared by the CPU and CUDA paths. The engine marks
// phase boundaries in the same order on every device; only the clock differs:
// a steady host clock on the CPU, CUDA events on a GPU (resolved with one
// synchronisation at the end of the step).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "runner/store/phases.hpp"

namespace runner {

/// The phases of a step: the store's table (runner/store/phases.hpp).
using store::Phase;

/// Durations of one step, ns; a phase not marked stays -1.
struct StepTimes {
  double wall_ns = -1;
  store::PhaseTimes phase_ns = store::no_phase_times();  ///< by store::phase_index()
};

class PhaseClock {
 public:
  virtual ~PhaseClock() = default;
  /// Marks the start of a step.
  virtual void begin_step() = 0;
  /// Marks the end of `phase` (which started at the previous mark).
  virtual void end_phase(Phase phase) = 0;
  /// Ends the step and returns its times. The only call that may block on a device.
  virtual StepTimes end_step() = 0;
};

/// Host steady clock.
class CpuPhaseClock final : public PhaseClock {
 public:
  void begin_step() override;
  void end_phase(Phase phase) override;
  StepTimes end_step() override;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_{};
  Clock::time_point last_{};
  StepTimes times_;
};

/// The clock for a device: "cpu" or "cuda". A CUDA clock exists only in
/// builds with CUDA code paths; elsewhere asking for one throws.
[[nodiscard]] std::unique_ptr<PhaseClock> make_phase_clock(const std::string& device);

}  // namespace runner
