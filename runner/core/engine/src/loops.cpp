// The train and infer loops: what one step of each does (data, h2d,
// forward, backward, comm and optimizer phases on the clock) and what
// happens around the steps (held-out evaluation, saved weights). The loop
// itself (warm-up, timing, per-step records) is step_loop.cpp's run_steps.
#include "loops.hpp"

#include <algorithm>
#include <functional>
#include <memory>

#include "metrics.hpp"
#include "runner/engine/profile.hpp"
#include "runner/engine/step_loop.hpp"

namespace runner {
namespace {

// The data and host-to-device phases of a step. The training setup's conversion of
// the inputs (dtype, memory format) happens on the device, in the last phase.
Batch next_batch(Workload& w, PhaseClock& clock) {
  Batch batch = w.batches->next();
  if (!w.batches->needs_copy()) {
    if (w.batches->from_loader()) w.setup->prepare_batch(batch);
    clock.end_phase(Phase::data);
    return batch;
  }
  clock.end_phase(Phase::data);
  w.batches->copy_to_device(batch);
  w.setup->prepare_batch(batch);
  clock.end_phase(Phase::h2d);
  return batch;
}

// One training step, the same on every rank: per micro-batch data, forward
// and backward (the phases sum over the micro-batches); then the training setup
// (unscale, clip, lr) and the optimizer. Returns the step's loss: the mean
// over its micro-batches.
//
// A data-parallel run synchronises gradients in the last micro-batch only
// (DDP's no_sync on the others). With the Reducer, backward ends when the
// last bucket is handed to the hook (every gradient computed), and the rest
// of backward is the comm phase: the communication backward did not hide.
// With reducer = "after_backward" the comm phase is the reduction after it.
}  // namespace

torch::Tensor train_step(Workload& w, PhaseClock& clock, std::int64_t step) {
  torch::optim::Optimizer& optimizer = w.optimizer->get();
  torch::Tensor step_loss;
  for (std::int64_t micro = 0; micro < w.accumulate; ++micro) {
    const bool sync = micro == w.accumulate - 1;
    if (w.sync) w.sync->before_forward(sync);
    const Batch batch = next_batch(w, clock);
    torch::Tensor loss;
    {
      const auto autocast = w.setup->autocast();
      const torch::Tensor output = w.model->forward(batch);
      loss = w.model->loss(output, batch);
    }
    if (w.accumulate > 1) loss = loss / static_cast<double>(w.accumulate);
    clock.end_phase(Phase::forward);
    if (micro == 0) {
      // Gradients that are views of the Reducer's buckets are zeroed in
      // place: LibTorch's default (set to none) would drop the views.
      const bool set_to_none = !(w.sync && w.sync->gradients_are_bucket_views());
      call_plugin(*w.optimizer_plugin, "zero_grad", [&] { optimizer.zero_grad(set_to_none); });
    }
    torch::Tensor backward_loss = w.setup->loss_for_backward(loss);
    w.gradients_computed = false;
    if (w.sync) w.sync->before_backward(backward_loss, sync);
    backward_loss.backward();
    if (!w.gradients_computed) clock.end_phase(Phase::backward);
    if (w.sync) {
      w.sync->after_backward(sync);
      if (sync) clock.end_phase(Phase::comm);
    }
    if (micro == 0) {
      step_loss = loss;  // no extra op when the step is one micro-batch
    } else {
      torch::NoGradGuard no_grad;
      step_loss = step_loss + loss;
    }
  }
  if (w.sync) w.comm_steps.push_back(w.sync->take_step());
  if (w.setup->before_step(step))
    call_plugin(*w.optimizer_plugin, "step", [&] { optimizer.step(); });
  w.setup->after_step();
  w.optimizer->on_step_end(step);
  clock.end_phase(Phase::optimizer);
  return step_loss;  // read with item() after the step's clock stops
}

namespace {

// A held-out evaluation after `steps` steps; the last one's values are also
// the run's eval_* metrics.
void evaluate(Workload& w, std::int64_t steps, RunOutcome& out) {
  // Not part of the steps' memory peak: an evaluation is not a step.
  if (w.memory) w.memory->pause();
  const auto means = w.evaluator->evaluate(*w.model, *w.setup, steps, out.evaluations);
  if (w.memory) w.memory->resume();
  out.metrics.erase(std::remove_if(out.metrics.begin(), out.metrics.end(),
                                   [](const store::Metric& m) { return m.name.starts_with("eval_"); }),
                    out.metrics.end());
  for (const auto& [metric, value] : means) out.metrics.push_back({"eval_" + metric, value, ""});
}

}  // namespace

// With the Reducer, backward's phase ends when every gradient is computed.
void mark_backward_end(Workload& w, PhaseClock& clock) {
  if (!w.sync) return;
  w.sync->on_gradients_computed([&w, &clock] {
    clock.end_phase(Phase::backward);
    w.gradients_computed = true;
  });
}

namespace {

// The steps' memory peak covers the measured steps: it starts before the
// first step and again after each warm-up or profiled one.
void begin_steps(Workload& w) {
  if (w.memory) w.memory->begin_steps();
}
void after_unmeasured_step(Workload& w, const RunOutcome& out) {
  if (w.memory && !out.samples.empty() && !out.samples.back().measured()) w.memory->restart_peak();
}

// [profile] steps: the profiler of this run's loop; null when it does not
// profile (then nothing of the profiler is touched).
std::unique_ptr<StepProfiler> make_profiler(const RunRequest& request) {
  const ProfileSettings& p = request.experiment->profile;
  if (!p.enabled()) return nullptr;
  const bool cuda = resolve_device(request.experiment->device.type) == "cuda";
  return std::make_unique<StepProfiler>(p.steps, p.record_shapes, cuda, request.profile_trace);
}

}  // namespace

void train_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  w.model->module().train();
  mark_backward_end(w, clock);
  std::int64_t evaluated_at = -1;
  // After each recorded step, outside its timing: what the training setup did (a
  // read of the device), then a held-out evaluation when one is due.
  const std::function<void(std::int64_t)> after_step = [&](std::int64_t done) {
    if (!out.samples.empty()) w.setup->record(out.samples.back());
    after_unmeasured_step(w, out);
    if (!w.evaluator || exp.eval.every <= 0 || done % exp.eval.every != 0) return;
    evaluate(w, done, out);
    evaluated_at = done;
  };
  const std::unique_ptr<StepProfiler> profiler = make_profiler(request);
  begin_steps(w);
  const std::int64_t done =
      run_steps(request, clock, exp.train.warmup, exp.train.steps,
                [&](std::int64_t step) { return train_step(w, clock, step); }, out, after_step,
                profiler.get());
  // At the end too, when the run finished (a diverged model has nothing to
  // evaluate; an interrupted run should stop now). Weights are saved from an
  // interrupted run as well: it may have trained for hours.
  const bool finished = out.status == store::RunStatus::finished;
  if (w.evaluator && finished && done > 0 && evaluated_at != done) evaluate(w, done, out);
  add_training_setup_metrics(out, *w.setup);
  if (!exp.train.save_to.empty() && (finished || out.status == store::RunStatus::interrupted))
    out.files.push_back(save_weights(exp.save_path(request.repeat_index), exp, *w.model,
                                     request.repeat_index, done));
}

void infer_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  w.model->module().eval();
  // One guard for the whole loop; which one is the experiment's choice.
  std::unique_ptr<c10::InferenceMode> inference;
  std::unique_ptr<torch::NoGradGuard> no_grad;
  if (exp.infer.mode == "inference") {
    inference = std::make_unique<c10::InferenceMode>();
  } else {
    no_grad = std::make_unique<torch::NoGradGuard>();
  }
  const std::unique_ptr<StepProfiler> profiler = make_profiler(request);
  begin_steps(w);
  run_steps(request, clock, exp.infer.warmup, exp.infer.batches,
            [&](std::int64_t) {
              const Batch batch = next_batch(w, clock);
              const auto autocast = w.setup->autocast();
              (void)w.model->forward(batch);
              clock.end_phase(Phase::forward);
              return torch::Tensor();
            },
            out, [&](std::int64_t) { after_unmeasured_step(w, out); }, profiler.get());
  inference.reset();
  no_grad.reset();
  if (w.evaluator && out.status == store::RunStatus::finished) evaluate(w, 0, out);
}

}  // namespace runner
