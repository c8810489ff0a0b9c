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

namespace runner {

/// The phases of a step, in order. Infer steps use data, h2d and forward
/// only; h2d only on a device other than the CPU; comm only in distributed runs.
enum class Phase : std::size_t { data = 0, h2d, forward, backward, optimizer, comm, count };

/// Durations of one step, ns; a phase not marked stays -1.
struct StepTimes {
  double wall_ns = -1;
  std::array<double, static_cast<std::size_t>(Phase::count)> phase_ns{-1, -1, -1, -1, -1, -1};
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
