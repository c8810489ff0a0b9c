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
  times_.phase_ns[store::phase_index(phase)] = ns_between(last_, now);
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
// device phases come from event pairs after one synchronisation.
class CudaPhaseClock final : public PhaseClock {
 public:
  CudaPhaseClock() {
    for (auto& e : events_) e = at::cuda::CUDAEvent(cudaEventDefault);
  }

  void begin_step() override {
    times_ = StepTimes{};
    marked_.fill(false);
    host_start_ = host_last_ = std::chrono::steady_clock::now();
    events_[0].record(at::cuda::getCurrentCUDAStream());
    last_event_ = 0;
  }

  void end_phase(Phase phase) override {
    const auto p = store::phase_index(phase);
    if (phase == Phase::data) {
      const auto now = std::chrono::steady_clock::now();
      times_.phase_ns[p] = ns_between(host_last_, now);
      host_last_ = now;
    }
    const std::size_t slot = p + 1;
    events_[slot].record(at::cuda::getCurrentCUDAStream());
    from_[slot] = last_event_;
    marked_[p] = true;
    last_event_ = slot;
  }

  StepTimes end_step() override {
    auto& last = events_[last_event_];
    last.synchronize();  // the one synchronisation of the step
    for (std::size_t p = 0; p < marked_.size(); ++p) {
      if (!marked_[p] || p == store::phase_index(Phase::data)) continue;
      const std::size_t slot = p + 1;
      times_.phase_ns[p] =
          static_cast<double>(events_[from_[slot]].elapsed_time(events_[slot])) * 1e6;
    }
    // Wall time spans host work and device work: from the host start to the
    // later of host now and the last device event, measured on the device
    // for the part after the first event.
    const double device_ns =
        static_cast<double>(events_[0].elapsed_time(last)) * 1e6;
    const double host_ns = ns_between(host_start_, std::chrono::steady_clock::now());
    times_.wall_ns = std::max(device_ns, host_ns);
    return times_;
  }

 private:
  static constexpr std::size_t kSlots = store::kPhaseCount + 1;
  std::array<at::cuda::CUDAEvent, kSlots> events_;
  std::array<std::size_t, kSlots> from_{};
  std::array<bool, store::kPhaseCount> marked_{};
  std::size_t last_event_ = 0;
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
