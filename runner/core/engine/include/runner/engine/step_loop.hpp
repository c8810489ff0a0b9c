// The step loop shared by training and inference (and by the bookkeeping
// benchmark, bench/bookkeeping.cpp): warm-up, measured steps, the per-step
// records. Everything the runner does per step besides the step's own work
// happens here.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>

#include "runner/engine/engine.hpp"
#include "runner/engine/phase_clock.hpp"

namespace runner {

/// Runs warm-up (`warmup` steps, or until the step times settle when it is
/// negative: "auto") and then `measured` steps. Each step is timed by `clock`
/// (begin_step / end_step around `body`) and recorded in out.samples; `body`
/// does one step's work, marks its phases on the clock, and returns the loss
/// (an undefined tensor for inference). Also appends the warm-up, first-step
/// and loss metrics, and sets out.status when the loss diverges or
/// request.stop is raised. `after_step`, when set, is called with the number
/// of steps done after each step is recorded, outside its timing (held-out
/// evaluation); it returns the steps done when the loop ends.
///
/// With a `profiler` ([profile] steps), its steps run between the warm-up
/// and the measured steps under LibTorch's profiler, recorded with
/// Sample::profiled and excluded from the statistics; the profiler is
/// started and finished outside every step's timing. Without one, nothing
/// of the profiler is touched.
class StepProfiler;
std::int64_t run_steps(const RunRequest& request, PhaseClock& clock, std::int64_t warmup,
                       std::int64_t measured,
                       const std::function<torch::Tensor(std::int64_t)>& body, RunOutcome& out,
                       const std::function<void(std::int64_t)>& after_step = {},
                       StepProfiler* profiler = nullptr);

}  // namespace runner
