// Steady-state detection for warmup = "auto" (warmup.hpp).
#include "runner/engine/warmup.hpp"

#include <algorithm>
#include <cmath>

#include "runner/experiment/experiment.hpp"

namespace runner {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

WarmupDetector::WarmupDetector(std::int64_t window, double tolerance, std::int64_t min_steps,
                               std::int64_t max_steps)
    : window_(std::max<std::int64_t>(window, 1)),
      tolerance_(tolerance),
      min_steps_(std::max(min_steps, 2 * std::max<std::int64_t>(window, 1))),
      max_steps_(std::max(max_steps, std::max(min_steps, 2 * std::max<std::int64_t>(window, 1)))) {}

WarmupDetector WarmupDetector::for_steps(std::int64_t measured_steps) {
  return WarmupDetector(10, 0.05, 10, max_auto_warmup_steps(measured_steps));
}

bool WarmupDetector::add(double wall_ns) {
  times_.push_back(wall_ns);
  const auto n = static_cast<std::int64_t>(times_.size());
  if (n >= min_steps_) {
    const auto end = times_.end();
    const double recent = median_of({end - window_, end});
    const double before = median_of({end - 2 * window_, end - window_});
    if (before > 0 && std::fabs(recent - before) / before <= tolerance_) {
      converged_ = true;
      return true;
    }
  }
  return n >= max_steps_;
}

}  // namespace runner
