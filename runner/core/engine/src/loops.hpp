// The train and infer loops over a built workload (loops.cpp), and the
// training step the other ranks of a data-parallel run repeat.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "runner/engine/engine.hpp"
#include "runner/engine/phase_clock.hpp"
#include "workload.hpp"

namespace runner {

/// One training step (every micro-batch, then the optimizer), its phases
/// marked on `clock`; returns the step's loss, the mean over its micro-batches.
torch::Tensor train_step(Workload& w, PhaseClock& clock, std::int64_t step);

/// With the Reducer, ends backward's phase when every gradient is computed
/// (the rest of backward is the comm phase); nothing without a sync.
void mark_backward_end(Workload& w, PhaseClock& clock);

/// The training run of rank 0: warm-up and measured steps, held-out
/// evaluations, the training setup's figures and the weights saved to train.save_to.
void train_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out);

/// The inference run: forward only, under the experiment's no-grad or
/// inference mode, then one held-out evaluation when [eval] asks.
void infer_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out);

}  // namespace runner
