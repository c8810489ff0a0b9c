#include "runner/core/engine/engine.hpp"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <sys/resource.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "runner/core/engine/phase_clock.hpp"
#include "runner/core/engine/sampler.hpp"
#include "runner/core/engine/step_loop.hpp"
#include "runner/core/engine/warmup.hpp"
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

  /// The next batch, on the host (the loader's work: the data phase).
  Batch next() {
    if (loader_ == nullptr) return fixed_;
    return loader_->get_batch(sampler_->next());
  }

  /// True when batches must be copied to the device (the h2d phase).
  [[nodiscard]] bool needs_copy() const { return loader_ != nullptr && !device_.is_cpu(); }

  /// Issues the host-to-device copy of a batch (non-blocking from pinned memory).
  void copy_to_device(Batch& batch) const {
    batch.inputs = batch.inputs.pin_memory().to(device_, /*non_blocking=*/true);
    if (batch.targets.defined()) batch.targets = batch.targets.pin_memory().to(device_, true);
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
    optimizer_context.total_steps =
        exp.train.steps + (exp.train.warmup < 0 ? WarmupDetector::for_steps(exp.train.steps).max_steps()
                                                : exp.train.warmup);
    w.optimizer = host.make_optimizer(exp.optimizer->plugin, exp.optimizer->options,
                                      optimizer_context);
  }
  return w;
}

// Summaries of the measured (non-warm-up) samples, one per phase that was timed.
void summarize(RunOutcome& out, const std::string& wall_metric) {
  std::vector<double> wall, data, h2d, forward, backward, optimizer, comm;
  for (const auto& s : out.samples) {
    if (s.warmup) continue;
    wall.push_back(s.wall_ns);
    if (s.data_ns >= 0) data.push_back(s.data_ns);
    if (s.h2d_ns >= 0) h2d.push_back(s.h2d_ns);
    if (s.comm_ns >= 0) comm.push_back(s.comm_ns);
    if (s.forward_ns >= 0) forward.push_back(s.forward_ns);
    if (s.backward_ns >= 0) backward.push_back(s.backward_ns);
    if (s.optimizer_ns >= 0) optimizer.push_back(s.optimizer_ns);
  }
  out.summaries.push_back(store::summarize(wall_metric, "ns", wall));
  if (!data.empty()) out.summaries.push_back(store::summarize("data", "ns", data));
  if (!h2d.empty()) out.summaries.push_back(store::summarize("h2d", "ns", h2d));
  if (!comm.empty()) out.summaries.push_back(store::summarize("comm", "ns", comm));
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

// The data and host-to-device phases of a step.
Batch next_batch(Workload& w, PhaseClock& clock) {
  Batch batch = w.batches->next();
  clock.end_phase(Phase::data);
  if (w.batches->needs_copy()) {
    w.batches->copy_to_device(batch);
    clock.end_phase(Phase::h2d);
  }
  return batch;
}

void train_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  w.model->module().train();
  torch::optim::Optimizer& optimizer = w.optimizer->get();
  run_steps(request, clock, exp.train.warmup, exp.train.steps,
            [&](std::int64_t step) {
              const Batch batch = next_batch(w, clock);
              const torch::Tensor output = w.model->forward(batch);
              torch::Tensor loss = w.model->loss(output, batch);
              clock.end_phase(Phase::forward);
              optimizer.zero_grad();
              loss.backward();
              clock.end_phase(Phase::backward);
              optimizer.step();
              w.optimizer->on_step_end(step);
              clock.end_phase(Phase::optimizer);
              return loss.detach();
            },
            out);
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
  run_steps(request, clock, exp.infer.warmup, exp.infer.batches,
            [&](std::int64_t) {
              const Batch batch = next_batch(w, clock);
              (void)w.model->forward(batch);
              clock.end_phase(Phase::forward);
              return torch::Tensor();
            },
            out);
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

double measure_peak_flop_per_s(const std::string& device_name) {
  // The best of several large fp32 matmuls: what this machine's BLAS (or
  // cuBLAS) can reach with the current thread settings. 2*n^3 FLOPs each.
  const torch::Device device(device_name);
  const std::int64_t n = device.is_cuda() ? 4096 : 1024;
  c10::InferenceMode guard;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  (void)torch::mm(a, b);  // warm-up: allocation, kernel selection, thread pool
  auto clock = make_phase_clock(device_name);
  double best_ns = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 5; ++i) {
    clock->begin_step();
    (void)torch::mm(a, b);
    clock->end_phase(Phase::forward);
    best_ns = std::min(best_ns, clock->end_step().phase_ns[static_cast<std::size_t>(Phase::forward)]);
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) /
         (best_ns * 1e-9);
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
    double samples_per_s = std::nan("");
    for (const auto& m : out.metrics)
      if (m.name == "samples_per_s") samples_per_s = m.value;
    if (const auto tokens = w.model->tokens_per_sample(); tokens && !std::isnan(samples_per_s))
      out.metrics.push_back({"tokens_per_s", *tokens * samples_per_s, "1/s"});
    if (const auto flops = w.model->flops_per_sample(); flops && !std::isnan(samples_per_s)) {
      // Training does forward + backward, about 3x the forward FLOPs.
      const double factor = exp.kind == "train" ? 3.0 : 1.0;
      const double achieved = factor * *flops * samples_per_s;
      out.metrics.push_back({"achieved_flop_per_s", achieved, "flop/s"});
      if (request.peak_flop_per_s && *request.peak_flop_per_s > 0)
        out.metrics.push_back({"fraction_of_peak", achieved / *request.peak_flop_per_s, ""});
    }
#ifdef RUNNER_WITH_CUDA
    if (device.is_cuda()) {
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
      out.metrics.push_back(
          {"peak_cuda_allocated_bytes",
           static_cast<double>(stats.allocated_bytes[static_cast<std::size_t>(
                                                        c10::CachingAllocator::StatType::AGGREGATE)]
                                   .peak),
           "B"});
    }
#endif
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
