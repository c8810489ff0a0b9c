// Steady-state detection for `warmup = "auto"`. No LibTorch: unit-tested on
// synthetic series.
#pragma once

#include <cstdint>
#include <vector>

namespace runner {

/// Decides when a run's step times have settled. After every warm-up step
/// the detector compares the median of the last `window` step times with the
/// median of the `window` before them; the warm-up ends at the first step
/// where they differ by at most `tolerance` (relative), but never before
/// `min_steps` steps, and at the latest after `max_steps` (then
/// converged() is false: the run never settled, which the run reports).
class WarmupDetector {
 public:
  WarmupDetector(std::int64_t window, double tolerance, std::int64_t min_steps,
                 std::int64_t max_steps);
  /// Adds one warm-up step's wall time; true when the warm-up is over
  /// (this step was its last).
  bool add(double wall_ns);
  /// Steps consumed so far.
  [[nodiscard]] std::int64_t steps() const { return static_cast<std::int64_t>(times_.size()); }
  /// The most warm-up steps this detector allows.
  [[nodiscard]] std::int64_t max_steps() const { return max_steps_; }
  /// True if the warm-up ended because the series settled.
  [[nodiscard]] bool converged() const { return converged_; }

  /// The defaults runner uses: window 10, 5 %, at least 10 steps, at most
  /// max(50, measured steps) steps.
  static WarmupDetector for_steps(std::int64_t measured_steps);

 private:
  std::int64_t window_;
  double tolerance_;
  std::int64_t min_steps_;
  std::int64_t max_steps_;
  std::vector<double> times_;
  bool converged_ = false;
};

}  // namespace runner
