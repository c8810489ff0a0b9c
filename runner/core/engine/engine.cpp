#include "runner/core/engine/engine.hpp"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <sys/resource.h>

#include <cmath>
#include <memory>
#include <numeric>

#include "runner/core/engine/phase_clock.hpp"
#include "runner/core/engine/sampler.hpp"
#include "runner/sdk.hpp"
#include "runner/store/stats.hpp"

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// The text of an exception without LibTorch's C++ backtrace.
std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

// Feeds batches to a step: from a loader through the index sampler, or a
// fixed example batch from the model (inference without a loader).
class BatchSource {
 public:
  BatchSource(Loader* loader, const DataSettings& settings, std::uint64_t seed,
              torch::Device device)
      : loader_(loader), device_(device) {
    sampler_ = std::make_unique<IndexSampler>(loader->size(), settings.batch_size,
                                              settings.shuffle, settings.drop_last, seed);
  }
  BatchSource(Batch fixed, torch::Device device) : fixed_(std::move(fixed)), device_(device) {}

  Batch next() {
    if (loader_ == nullptr) return fixed_;
    Batch batch = loader_->get_batch(sampler_->next());
    if (device_.is_cuda()) {
      batch.inputs = batch.inputs.to(device_, /*non_blocking=*/true);
      if (batch.targets.defined()) batch.targets = batch.targets.to(device_, true);
    }
    return batch;
  }

 private:
  Loader* loader_ = nullptr;
  std::unique_ptr<IndexSampler> sampler_;
  Batch fixed_;
  torch::Device device_;
};

// Everything a loop needs, built from the plugins.
struct Workload {
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<BatchSource> batches;
  std::int64_t batch_size = 0;
};

Workload build(const Experiment& exp, const PluginHost& host, std::uint64_t seed,
               torch::Device device) {
  Workload w;
  ModelContext model_context;
  model_context.device = device;
  model_context.seed = seed;
  if (exp.data) {
    LoaderContext loader_context;
    loader_context.seed = seed;
    w.loader = host.make_loader(exp.data->plugin, exp.data->options, loader_context);
    const DataSpec spec = w.loader->spec();
    model_context.input_shape = spec.input_shape;
    model_context.num_classes = spec.num_classes;
  }
  w.model = host.make_model(exp.model.plugin, exp.model.options, model_context);
  w.model->module().to(device);
  w.batch_size = exp.data_settings.batch_size;
  if (w.loader) {
    w.batches = std::make_unique<BatchSource>(w.loader.get(), exp.data_settings, seed, device);
  } else {
    w.batches = std::make_unique<BatchSource>(
        w.model->example_batch(exp.data_settings.batch_size, device), device);
  }
  if (exp.kind == "train") {
    OptimizerContext optimizer_context;
    for (const auto& p : w.model->module().parameters())
      if (p.requires_grad()) optimizer_context.parameters.push_back(p);
    optimizer_context.total_steps = exp.train.warmup + exp.train.steps;
    w.optimizer = host.make_optimizer(exp.optimizer->plugin, exp.optimizer->options,
                                      optimizer_context);
  }
  return w;
}

store::Sample to_sample(std::int64_t step, bool warmup, const StepTimes& t, double loss) {
  store::Sample s;
  s.step = step;
  s.warmup = warmup;
  s.wall_ns = t.wall_ns;
  s.data_ns = t.phase_ns[static_cast<std::size_t>(Phase::data)];
  s.forward_ns = t.phase_ns[static_cast<std::size_t>(Phase::forward)];
  s.backward_ns = t.phase_ns[static_cast<std::size_t>(Phase::backward)];
  s.optimizer_ns = t.phase_ns[static_cast<std::size_t>(Phase::optimizer)];
  s.loss = loss;
  return s;
}

// Summaries of the measured (non-warm-up) samples, one per phase that was timed.
void summarize(RunOutcome& out, const std::string& wall_metric) {
  std::vector<double> wall, data, forward, backward, optimizer;
  for (const auto& s : out.samples) {
    if (s.warmup) continue;
    wall.push_back(s.wall_ns);
    if (s.data_ns >= 0) data.push_back(s.data_ns);
    if (s.forward_ns >= 0) forward.push_back(s.forward_ns);
    if (s.backward_ns >= 0) backward.push_back(s.backward_ns);
    if (s.optimizer_ns >= 0) optimizer.push_back(s.optimizer_ns);
  }
  out.summaries.push_back(store::summarize(wall_metric, "ns", wall));
  if (!data.empty()) out.summaries.push_back(store::summarize("data", "ns", data));
  if (!forward.empty()) out.summaries.push_back(store::summarize("forward", "ns", forward));
  if (!backward.empty()) out.summaries.push_back(store::summarize("backward", "ns", backward));
  if (!optimizer.empty())
    out.summaries.push_back(store::summarize("optimizer", "ns", optimizer));
}

void add_throughput(RunOutcome& out, std::int64_t batch_size) {
  double wall_ns = 0;
  std::int64_t measured = 0;
  for (const auto& s : out.samples)
    if (!s.warmup) {
      wall_ns += s.wall_ns;
      ++measured;
    }
  out.metrics.push_back({"measured_steps", static_cast<double>(measured), "count"});
  if (measured > 0 && wall_ns > 0)
    out.metrics.push_back(
        {"samples_per_s", static_cast<double>(measured * batch_size) / (wall_ns * 1e-9), "1/s"});
}

class ProgressReporter {
 public:
  ProgressReporter(const RunRequest& request, std::int64_t total)
      : callback_(request.on_progress), total_(total) {}
  void step(std::int64_t done, double loss) {
    if (!callback_) return;
    const auto now = Clock::now();
    if (done != total_ && now - last_ < std::chrono::seconds(2)) return;
    const double elapsed = seconds_between(last_, now);
    Progress p;
    p.step = done;
    p.total_steps = total_;
    p.last_loss = loss;
    p.steps_per_s = elapsed > 0 ? static_cast<double>(done - last_step_) / elapsed : 0;
    callback_(p);
    last_ = now;
    last_step_ = done;
  }

 private:
  std::function<void(const Progress&)> callback_;
  std::int64_t total_;
  Clock::time_point last_ = Clock::now();
  std::int64_t last_step_ = 0;
};

// Checked before every step: an interrupt ends the run between steps, so
// every recorded step is complete.
bool stop_requested(const RunRequest& request, std::int64_t step, RunOutcome& out) {
  if (request.stop == nullptr || !request.stop->load(std::memory_order_relaxed)) return false;
  out.status = store::kStatusInterrupted;
  out.error = "interrupted before step " + std::to_string(step);
  return true;
}

void train_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  torch::nn::Module& module = w.model->module();
  module.train();
  torch::optim::Optimizer& optimizer = w.optimizer->get();
  const std::int64_t total = exp.train.warmup + exp.train.steps;
  out.samples.reserve(static_cast<std::size_t>(total));
  ProgressReporter progress(request, total);
  double first_loss = std::nan("");
  for (std::int64_t step = 0; step < total; ++step) {
    if (stop_requested(request, step, out)) break;
    clock.begin_step();
    const Batch batch = w.batches->next();
    clock.end_phase(Phase::data);
    const torch::Tensor output = w.model->forward(batch);
    const torch::Tensor loss = w.model->loss(output, batch);
    clock.end_phase(Phase::forward);
    optimizer.zero_grad();
    loss.backward();
    clock.end_phase(Phase::backward);
    optimizer.step();
    w.optimizer->on_step_end(step);
    clock.end_phase(Phase::optimizer);
    const StepTimes times = clock.end_step();
    const double loss_value = loss.item<double>();  // after end_step: no extra sync on a GPU
    out.samples.push_back(to_sample(step, step < exp.train.warmup, times, loss_value));
    if (step == 0) {
      first_loss = loss_value;
      out.metrics.push_back({"time_to_first_step_s",
                             seconds_between(request.process_start, Clock::now()), "s"});
    }
    if (!std::isfinite(loss_value)) {
      out.status = store::kStatusDiverged;
      out.error = std::string("loss is ") +
                  (std::isnan(loss_value) ? "nan" : loss_value > 0 ? "inf" : "-inf") +
                  " at step " + std::to_string(step);
      break;
    }
    progress.step(step + 1, loss_value);
  }
  // Final loss: mean over the last few measured steps, which is less noisy than one step.
  double tail_sum = 0;
  int tail_n = 0;
  for (auto it = out.samples.rbegin(); it != out.samples.rend() && tail_n < 10; ++it) {
    if (it->warmup) break;
    tail_sum += it->loss;
    ++tail_n;
  }
  out.metrics.push_back({"loss_initial", first_loss, ""});
  if (tail_n > 0) out.metrics.push_back({"loss_final", tail_sum / tail_n, ""});
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
  const std::int64_t total = exp.infer.warmup + exp.infer.batches;
  out.samples.reserve(static_cast<std::size_t>(total));
  ProgressReporter progress(request, total);
  for (std::int64_t step = 0; step < total; ++step) {
    if (stop_requested(request, step, out)) break;
    clock.begin_step();
    const Batch batch = w.batches->next();
    clock.end_phase(Phase::data);
    const torch::Tensor output = w.model->forward(batch);
    clock.end_phase(Phase::forward);
    const StepTimes times = clock.end_step();
    out.samples.push_back(to_sample(step, step < exp.infer.warmup, times, std::nan("")));
    if (step == 0)
      out.metrics.push_back({"time_to_first_step_s",
                             seconds_between(request.process_start, Clock::now()), "s"});
    progress.step(step + 1, std::nan(""));
  }
}

}  // namespace

std::string resolve_device(const std::string& type) {
  if (type == "cpu") return "cpu";
  const bool cuda = torch::cuda::is_available();
  if (type == "auto") return cuda ? "cuda" : "cpu";
  if (type == "cuda" && !cuda)
    throw Error("device.type is \"cuda\" but no CUDA device is available",
                "use device.type = \"cpu\" or \"auto\" on this machine");
  return type;
}

void configure_runtime(const Experiment& experiment) {
  if (experiment.device.threads > 0)
    at::set_num_threads(static_cast<int>(experiment.device.threads));
  if (experiment.device.interop_threads > 0)
    at::set_num_interop_threads(static_cast<int>(experiment.device.interop_threads));
}

std::uint64_t run_seed(const Experiment& experiment, std::int64_t) {
  return static_cast<std::uint64_t>(experiment.seed);
}

RunOutcome execute_run(const RunRequest& request) {
  const Experiment& exp = *request.experiment;
  RunOutcome out;
  out.status = store::kStatusFinished;
  const auto run_start = Clock::now();
  try {
    const std::uint64_t seed = run_seed(exp, request.repeat_index);
    torch::manual_seed(seed);
    const std::string device_name = resolve_device(exp.device.type);
    const torch::Device device(device_name);
    Workload w = build(exp, *request.host, seed, device);
    auto clock = make_phase_clock(device_name);
    out.metrics.push_back({"setup_s", seconds_between(run_start, Clock::now()), "s"});
    out.metrics.push_back(
        {"parameters", static_cast<double>(w.model->parameter_count()), "count"});
    if (const auto flops = w.model->flops_per_sample())
      out.metrics.push_back({"flops_per_sample", *flops, "flop"});
    if (exp.kind == "train") {
      train_loop(request, w, *clock, out);
      summarize(out, "step_time");
    } else {
      infer_loop(request, w, *clock, out);
      summarize(out, "latency");
    }
    add_throughput(out, w.batch_size);
    if (const auto flops = w.model->flops_per_sample()) {
      for (const auto& m : out.metrics)
        if (m.name == "samples_per_s") {
          // Training does forward + backward, about 3x the forward FLOPs.
          const double factor = exp.kind == "train" ? 3.0 : 1.0;
          out.metrics.push_back({"achieved_flop_per_s", factor * *flops * m.value, "flop/s"});
          break;
        }
    }
  } catch (const Error& e) {
    out.status = store::kStatusFailed;
    out.error = e.what();
  } catch (const std::exception& e) {
    out.status = store::kStatusFailed;
    out.error = message_of(e);
  }
  out.metrics.push_back({"peak_rss_bytes", peak_rss_bytes(), "B"});
  out.metrics.push_back({"run_s", seconds_between(run_start, Clock::now()), "s"});
  return out;
}

}  // namespace runner
