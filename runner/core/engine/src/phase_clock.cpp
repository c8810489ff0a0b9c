// Per-step phase timing: a host clock on the CPU, CUDA events on a GPU (phase_clock.hpp).
#include "runner/engine/phase_clock.hpp"

#include "runner/common/error.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <vector>
#endif

namespace runner {

namespace {
double ns_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}
}  // namespace

void CpuPhaseClock::begin_step() {
  times_ = StepTimes{};
  start_ = last_ = Clock::now();
}

void CpuPhaseClock::end_phase(Phase phase) {
  const auto now = Clock::now();
  // A phase marked several times in a step (gradient accumulation: data,
  // forward and backward once per micro-batch) accumulates.
  double& ns = times_.phase_ns[store::phase_index(phase)];
  ns = (ns < 0 ? 0 : ns) + ns_between(last_, now);
  last_ = now;
}

StepTimes CpuPhaseClock::end_step() {
  times_.wall_ns = ns_between(start_, Clock::now());
  return times_;
}

#ifdef RUNNER_WITH_CUDA
namespace {

// CUDA events on the current stream at every mark. The data phase is host
// work (waiting for the loader), so it is timed on the host as well; the
// device phases come from consecutive event pairs after one synchronisation.
// A phase marked several times in a step (gradient accumulation) sums its
// intervals; the pool of events grows to the most marks a step has made.
class CudaPhaseClock final : public PhaseClock {
 public:
  void begin_step() override {
    times_ = StepTimes{};
    marks_.clear();
    host_start_ = host_last_ = std::chrono::steady_clock::now();
    record(kStart);
  }

  void end_phase(Phase phase) override {
    const auto p = store::phase_index(phase);
    if (phase == Phase::data) {
      const auto now = std::chrono::steady_clock::now();
      double& ns = times_.phase_ns[p];
      ns = (ns < 0 ? 0 : ns) + ns_between(host_last_, now);
      host_last_ = now;
    }
    record(p);
  }

  StepTimes end_step() override {
    at::cuda::CUDAEvent& last = events_[marks_.size() - 1];
    last.synchronize();  // the one synchronisation of the step
    for (std::size_t m = 1; m < marks_.size(); ++m) {
      const std::size_t p = marks_[m];
      if (p == store::phase_index(Phase::data)) continue;
      double& ns = times_.phase_ns[p];
      ns = (ns < 0 ? 0 : ns) + static_cast<double>(events_[m - 1].elapsed_time(events_[m])) * 1e6;
    }
    // Wall time spans host work and device work: from the host start to the
    // later of host now and the last device event, measured on the device
    // for the part after the first event.
    const double device_ns = static_cast<double>(events_[0].elapsed_time(last)) * 1e6;
    const double host_ns = ns_between(host_start_, std::chrono::steady_clock::now());
    times_.wall_ns = std::max(device_ns, host_ns);
    return times_;
  }

 private:
  static constexpr std::size_t kStart = store::kPhaseCount;  // the step's first mark

  void record(std::size_t phase) {
    const std::size_t m = marks_.size();
    if (m == events_.size()) events_.emplace_back(cudaEventDefault);
    events_[m].record(at::cuda::getCurrentCUDAStream());
    marks_.push_back(phase);
  }

  std::vector<at::cuda::CUDAEvent> events_;  // events_[m] is mark m of the current step
  std::vector<std::size_t> marks_;           // the phase each mark ends (kStart: the start)
  std::chrono::steady_clock::time_point host_start_{}, host_last_{};
  StepTimes times_;
};

}  // namespace
#endif

std::unique_ptr<PhaseClock> make_phase_clock(const std::string& device) {
  if (device == "cpu") return std::make_unique<CpuPhaseClock>();
#ifdef RUNNER_WITH_CUDA
  if (device == "cuda") return std::make_unique<CudaPhaseClock>();
#endif
  throw Error("no phase clock for device '" + device + "' in this build", {}, ErrorKind::run);
}

}  // namespace runner
