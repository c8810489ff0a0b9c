// The step loop shared by training and inference: warm-up, measured steps, records (step_loop.hpp).
#include "runner/engine/step_loop.hpp"

#include <chrono>
#include <cmath>
#include <string>

#include "runner/engine/profile.hpp"
#include "runner/engine/warmup.hpp"
#include "runner/store/store.hpp"

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

store::Sample to_sample(std::int64_t step, bool warmup, bool profiled, const StepTimes& t,
                        double loss) {
  store::Sample s;
  s.step = step;
  s.warmup = warmup;
  s.profiled = profiled;
  s.wall_ns = t.wall_ns;
  s.phase_ns = t.phase_ns;
  s.loss = loss;
  return s;
}

// The loss a run reports (loss_final) and its progress line shows: the mean
// over the last 10 measured steps, less noisy than one step. Before any
// measured step (warm-up, profiled steps), the mean of the latest steps of
// the current kind. NaN when the steps have no loss.
double tail_loss(const std::vector<store::Sample>& samples) {
  if (samples.empty()) return std::nan("");
  const bool measured = samples.back().measured();
  double sum = 0;
  int n = 0;
  for (auto it = samples.rbegin(); it != samples.rend() && n < 10; ++it) {
    if (it->measured() != measured) break;
    sum += it->loss;
    ++n;
  }
  return sum / n;
}

class ProgressReporter {
 public:
  ProgressReporter(const RunRequest& request, std::int64_t total)
      : callback_(request.on_progress), total_(total) {}
  void step(std::int64_t done, const std::vector<store::Sample>& samples) {
    if (!callback_) return;
    const store::Sample& sample = samples.back();
    const double data_ns = sample.phase(store::Phase::data);
    if (data_ns >= 0 && sample.wall_ns > 0) {
      data_ns_ += data_ns;
      wall_ns_ += sample.wall_ns;
    }
    const auto now = Clock::now();
    if (done != total_ && now - last_ < std::chrono::seconds(2)) return;
    const double elapsed = seconds_between(last_, now);
    Progress p;
    p.step = done;
    p.total_steps = total_;
    p.last_loss = tail_loss(samples);
    p.steps_per_s = elapsed > 0 ? static_cast<double>(done - last_step_) / elapsed : 0;
    if (wall_ns_ > 0) p.data_share = data_ns_ / wall_ns_;
    callback_(p);
    last_ = now;
    last_step_ = done;
    data_ns_ = wall_ns_ = 0;
  }

 private:
  std::function<void(const Progress&)> callback_;
  std::int64_t total_;
  Clock::time_point last_ = Clock::now();
  std::int64_t last_step_ = 0;
  double data_ns_ = 0, wall_ns_ = 0;  // the data phase and wall time since the last report
};

// Checked before every step: an interrupt ends the run between steps, so
// every recorded step is complete.
bool stop_requested(const RunRequest& request, std::int64_t step, RunOutcome& out) {
  if (request.stop == nullptr || !request.stop->load(std::memory_order_relaxed)) return false;
  out.status = store::RunStatus::interrupted;
  out.error = "interrupted before step " + std::to_string(step);
  return true;
}

}  // namespace

std::int64_t run_steps(const RunRequest& request, PhaseClock& clock, std::int64_t warmup,
                       std::int64_t measured,
                       const std::function<torch::Tensor(std::int64_t)>& body, RunOutcome& out,
                       const std::function<void(std::int64_t)>& after_step,
                       StepProfiler* profiler) {
  const bool auto_warmup = warmup < 0;
  const std::int64_t to_profile = profiler != nullptr ? profiler->steps() : 0;
  WarmupDetector detector = WarmupDetector::for_steps(measured);
  bool warming = auto_warmup || warmup > 0;
  std::int64_t warm_steps = 0, measured_done = 0, profiled_done = 0;
  out.samples.reserve(
      static_cast<std::size_t>(measured + to_profile + (auto_warmup ? 50 : warmup)));
  ProgressReporter progress(request, measured + to_profile + (auto_warmup ? 0 : warmup));
  double first_loss = std::nan("");
  for (std::int64_t step = 0; warming || profiled_done < to_profile || measured_done < measured;
       ++step) {
    if (stop_requested(request, step, out)) break;
    const bool profiling = !warming && profiled_done < to_profile;
    if (profiling) {
      if (profiled_done == 0) profiler->start();
      profiler->begin_step(step);
    }
    clock.begin_step();
    const torch::Tensor loss = body(step);
    const StepTimes times = clock.end_step();
    if (profiling) profiler->end_step();
    // Read after end_step: on a GPU the step is already synchronised, so this adds none.
    const double loss_value = loss.defined() ? loss.item<double>() : std::nan("");
    out.samples.push_back(to_sample(step, warming, profiling, times, loss_value));
    if (step == 0) {
      first_loss = loss_value;
      out.metrics.push_back({"time_to_first_step_s",
                             seconds_between(request.process_start, Clock::now()), "s"});
    }
    if (loss.defined() && !std::isfinite(loss_value)) {
      out.status = store::RunStatus::diverged;
      out.error = std::string("loss is ") +
                  (std::isnan(loss_value) ? "nan" : loss_value > 0 ? "inf" : "-inf") +
                  " at step " + std::to_string(step);
      break;
    }
    if (warming) {
      ++warm_steps;
      warming = auto_warmup ? !detector.add(times.wall_ns) : warm_steps < warmup;
    } else if (profiling) {
      // Finished before the measured steps, outside every step's timing.
      if (++profiled_done == to_profile) profiler->finish(profiled_done, out);
    } else {
      ++measured_done;
    }
    progress.step(auto_warmup ? measured_done + profiled_done : step + 1, out.samples);
    if (after_step) after_step(step + 1);
  }
  // A run that ended during its profiled steps keeps what they recorded
  // (finish does nothing when the profiler is not running).
  if (profiler != nullptr) {
    std::int64_t profiled = 0;
    for (const auto& s : out.samples) profiled += s.profiled ? 1 : 0;
    profiler->finish(profiled, out);
  }
  out.metrics.push_back({"warmup_steps", static_cast<double>(warm_steps), "count"});
  if (auto_warmup)
    out.metrics.push_back({"warmup_converged", detector.converged() ? 1.0 : 0.0, "bool"});
  if (!std::isnan(first_loss)) {
    out.metrics.push_back({"loss_initial", first_loss, ""});
    if (!out.samples.empty() && out.samples.back().measured())
      out.metrics.push_back({"loss_final", tail_loss(out.samples), ""});
  }
  return static_cast<std::int64_t>(out.samples.size());
}


}  // namespace runner
