#include "runner/engine/engine.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <optional>
#include <limits>
#include <memory>
#include <numeric>

#include "evaluation.hpp"
#include "workload.hpp"
#include "kernel_run.hpp"
#include "option_errors.hpp"
#include "runner/common/strings.hpp"
#include "recipe.hpp"
#include "runner/recipes/memory.hpp"
#include "runner/process/isolation.hpp"
#include "runner/engine/phase_clock.hpp"
#include "runner/engine/process_group.hpp"
#include "runner/engine/ranks.hpp"
#include "runner/engine/reducer.hpp"
#include "runner/engine/pipeline.hpp"
#include "runner/engine/profile.hpp"
#include "runner/engine/step_loop.hpp"
#include "runner/engine/warmup.hpp"
#include "runner/comm_hook.hpp"
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

// The experiment's section that configures plugins of `kind`.
const char* section_of(PluginKind kind) {
  switch (kind) {
    case PluginKind::model: return "model";
    case PluginKind::optimizer: return "optimizer";
    case PluginKind::loader: return "data";
    case PluginKind::comm_hook: return "comm_hook";
    case PluginKind::kernel: break;
  }
  return "kernel";
}

}  // namespace

[[noreturn]] void rethrow_at_option(const PluginOptionError& e, const PluginChoice& choice) {
  const std::string section = section_of(e.plugin_kind());
  throw Error(choice.where_of(e.option()),
              "'" + section + "." + e.option() + "' of " + section + " plugin '" + choice.plugin +
                  "': " + e.detail(),
              "run 'runner plugins describe " + choice.plugin + "' to see its options");
}

std::unique_ptr<Loader> make_loader_for(const Experiment& exp, const PluginHost& host,
                                        const LoaderContext& context) {
  try {
    return host.make_loader(exp.data->plugin, exp.data->options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, *exp.data);
  } catch (const PluginDataError& e) {
    throw Error(exp.data->where, e.what(), e.hint());
  }
}

std::unique_ptr<Model> make_model_for(const Experiment& exp, const PluginHost& host,
                                      const ModelContext& context) {
  try {
    return host.make_model(exp.model.plugin, exp.model.options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, exp.model);
  } catch (const PluginDataError& e) {
    throw Error(exp.model.where, e.what(), e.hint());
  }
}

std::unique_ptr<Optimizer> make_optimizer_for(const Experiment& exp, const PluginHost& host,
                                              const OptimizerContext& context) {
  try {
    return host.make_optimizer(exp.optimizer->plugin, exp.optimizer->options, context);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, *exp.optimizer);
  }
}

LoaderContext loader_context(const Experiment& exp, std::uint64_t seed, std::int64_t rank,
                             std::int64_t world_size, Split split) {
  LoaderContext context;
  context.seed = seed;
  context.rank = rank;
  context.world_size = world_size;
  context.split = split;
  context.skip_bad_samples = exp.data_settings.on_error == "skip";
  return context;
}

[[noreturn]] void rethrow_at_key(const AugmentError& e, const Experiment& exp) {
  throw Error(exp.where_of("data." + e.key()), e.what(), e.hint());
}

namespace {

// A data-parallel run's process group and gradient synchronisation. Every
// rank starts from rank 0's parameters and buffers, as DDP does.
void build_sync(Workload& w, const Experiment& exp, const PluginHost& host, const RankInfo& rank) {
  try {
    w.group = make_process_group(exp.distributed.backend, *rank.rendezvous, store_of(*rank.link));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The usual cause: a rank that never came (a wrong port, a node that did not start).
    const std::vector<int> missing = rank.link->missing_ranks();
    if (missing.empty()) throw;
    std::vector<std::string> names;
    for (int r : missing) names.push_back(std::to_string(r));
    throw Error("the rendezvous timed out after " +
                    std::to_string(rank.rendezvous->timeout.count() / 1000) + " s: rank" +
                    (names.size() == 1 ? " " : "s ") + join(names, ", ") + " of " +
                    std::to_string(rank.world_size()) + " never joined (" +
                    message_of(e).substr(0, message_of(e).find('\n')) + ")",
                "start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, or "
                "raise [distributed] timeout",
                ErrorKind::run);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<torch::Tensor> parameters, buffers, everything;
  for (const auto& item : w.model->module().named_parameters())
    if (item.value().requires_grad()) {
      named.emplace_back(item.key(), item.value());
      parameters.push_back(item.value());
    }
  for (const auto& b : w.model->module().buffers()) buffers.push_back(b);
  everything = parameters;
  everything.insert(everything.end(), buffers.begin(), buffers.end());
  broadcast_from_rank0(everything, w.group);
  w.comm_hook = host.make_comm_hook(exp.comm_hook->plugin, exp.comm_hook->options);
  const DistributedSettings& d = exp.distributed;
  SyncOptions options;
  options.bucket_bytes = static_cast<std::int64_t>(d.bucket_mb * 1024.0 * 1024.0);
  options.first_bucket_bytes = static_cast<std::int64_t>(d.first_bucket_mb * 1024.0 * 1024.0);
  options.find_unused_parameters = d.find_unused_parameters;
  options.gradient_as_bucket_view = d.gradient_as_bucket_view;
  options.static_graph = d.static_graph;
  options.broadcast_buffers = d.broadcast_buffers;
  w.sync = d.reducer == "after_backward"
               ? make_after_backward_sync(parameters, buffers, w.group, *w.comm_hook, options)
               : make_ddp_sync(named, buffers, w.group, *w.comm_hook, options);
}

}  // namespace

void build(Workload& w, const Experiment& exp, const PluginHost& host, std::uint64_t seed,
           torch::Device device, const RankInfo& rank) {
  ModelContext model_context;
  model_context.device = device;
  model_context.seed = seed;
  model_context.rank = rank.rank();
  model_context.world_size = rank.world_size();
  model_context.batch_size = exp.data_settings.batch_size;
  model_context.training = exp.kind == RunKind::train;
  if (exp.data) {
    w.loader = make_loader_for(exp, host, loader_context(exp, seed, rank.rank(), rank.world_size()));
    // The pipeline starts reading now, while the model is built.
    try {
      w.batches = std::make_unique<BatchSource>(w.loader.get(), exp.data_settings, seed, device,
                                                rank.rank(), rank.world_size());
    } catch (const AugmentError& e) {
      rethrow_at_key(e, exp);
    }
    const DataSpec spec = w.batches->pipeline().spec();
    model_context.input_shape = spec.input_shape;
    model_context.num_classes = spec.num_classes;
  }
  w.recipe = std::make_unique<Recipe>(exp, device);
  if (w.loader) w.recipe->check_input_shape(model_context.input_shape);
  w.model = make_model_for(exp, host, model_context);
  if (!exp.model_settings.init_from.empty())  // on the CPU, before the move
    w.init_file = load_initial_weights(exp, *w.model, w.skipped);
  w.model->module().to(device);
  w.recipe->prepare_model(w.model->module());
  w.batch_size = exp.data_settings.batch_size;
  if (!w.loader) {
    Batch example = w.model->example_batch(exp.data_settings.batch_size, device);
    if (example.inputs.defined() && example.inputs.dim() >= 1) {
      const auto sizes = example.inputs.sizes();
      w.recipe->check_input_shape(std::vector<std::int64_t>(sizes.begin() + 1, sizes.end()));
    }
    w.recipe->prepare_batch(example);
    w.batches = std::make_unique<BatchSource>(std::move(example), device);
  }
  if (exp.kind == RunKind::train) {
    w.accumulate = exp.train.accumulate;
    const OptimizerContext optimizer_context =
        make_optimizer_context(w.model->module(), exp.total_train_steps(), device);
    w.optimizer = make_optimizer_for(exp, host, optimizer_context);
    w.optimizer_plugin = host.find(PluginKind::optimizer, exp.optimizer->plugin);
    w.recipe->attach(*w.optimizer, optimizer_context.parameters);
  }
  if (rank.rendezvous != nullptr) build_sync(w, exp, host, rank);
}

namespace {

// Summaries of the measured samples (neither warm-up nor profiled), one per
// phase that was timed.
void summarize(RunOutcome& out, const std::string& wall_metric) {
  std::vector<double> wall;
  std::array<std::vector<double>, store::kPhaseCount> phases;
  for (const auto& s : out.samples) {
    if (!s.measured()) continue;
    wall.push_back(s.wall_ns);
    for (std::size_t p = 0; p < store::kPhaseCount; ++p)
      if (s.phase_ns[p] >= 0) phases[p].push_back(s.phase_ns[p]);
  }
  out.summaries.push_back(store::summarize(wall_metric, "ns", wall));
  for (const store::PhaseInfo& phase : store::kPhases) {
    auto& values = phases[store::phase_index(phase.phase)];
    if (!values.empty())
      out.summaries.push_back(store::summarize(phase.name, "ns", std::move(values)));
  }
}

// samples_per_s counts the samples of all ranks (each rank takes a batch per step).
void add_throughput(RunOutcome& out, std::int64_t batch_size) {
  double wall_ns = 0;
  std::int64_t measured = 0;
  for (const auto& s : out.samples)
    if (s.measured()) {
      wall_ns += s.wall_ns;
      ++measured;
    }
  out.metrics.push_back({"measured_steps", static_cast<double>(measured), "count"});
  if (measured > 0 && wall_ns > 0)
    out.metrics.push_back(
        {"samples_per_s", static_cast<double>(measured * batch_size) / (wall_ns * 1e-9), "1/s"});
}

// A data-parallel run's communication over its measured steps: the total
// time per step from the first bucket handed to the hook to the last one
// done (summary comm_total; the comm phase is the part backward did not
// hide), the gradient bytes, the bytes the hook sent for them (payload) and
// their ratio, and a ring-allreduce estimate of the bytes on the wire.
void add_comm_metrics(RunOutcome& out, const Workload& w, std::int64_t world) {
  std::vector<double> spans;
  double gradient = 0, payload = 0;
  std::int64_t steps = 0;
  for (std::size_t i = 0; i < w.comm_steps.size() && i < out.samples.size(); ++i) {
    if (!out.samples[i].measured()) continue;
    const CommStep& c = w.comm_steps[i];
    if (c.span_ns >= 0) spans.push_back(c.span_ns);
    gradient += static_cast<double>(c.bucket_bytes);
    payload += static_cast<double>(c.payload_bytes);
    ++steps;
  }
  out.metrics.push_back({"world_size", static_cast<double>(world), "count"});
  out.metrics.push_back({"comm_buckets", static_cast<double>(w.sync->bucket_count()), "count"});
  if (!spans.empty()) out.summaries.push_back(store::summarize("comm_total", "ns", std::move(spans)));
  if (steps == 0) return;
  gradient /= static_cast<double>(steps);
  payload /= static_cast<double>(steps);
  const double n = static_cast<double>(world);
  out.metrics.push_back({"comm_gradient_bytes_per_step", gradient, "B"});
  out.metrics.push_back({"comm_payload_bytes_per_step", payload, "B"});
  out.metrics.push_back({"comm_bytes_per_step", world > 1 ? 2.0 * payload * (n - 1) / n : 0.0, "B"});
  if (payload > 0) out.metrics.push_back({"compression_ratio", gradient / payload, ""});
}

// What the input pipeline could do and did: its capacity in samples/s with
// its workers (never waiting on the training loop), the fraction of its
// workers' time spent making batches, and the samples it skipped.
void add_pipeline_metrics(RunOutcome& out, const PipelineStats& stats, std::int64_t skipped_at_start,
                          bool skipping) {
  if (const double capacity = stats.capacity_per_s(); !std::isnan(capacity))
    out.metrics.push_back({"loader_samples_per_s", capacity, "1/s"});
  if (const double busy = stats.busy_fraction(); !std::isnan(busy))
    out.metrics.push_back({"loader_busy_fraction", busy, ""});
  if (skipping || stats.skipped > 0 || skipped_at_start > 0)
    out.metrics.push_back(
        {"skipped_samples", static_cast<double>(stats.skipped + skipped_at_start), "count"});
}

// The data and host-to-device phases of a step. The recipe's conversion of
// the inputs (dtype, memory format) happens on the device, in the last phase.
Batch next_batch(Workload& w, PhaseClock& clock) {
  Batch batch = w.batches->next();
  if (!w.batches->needs_copy()) {
    if (w.batches->from_loader()) w.recipe->prepare_batch(batch);
    clock.end_phase(Phase::data);
    return batch;
  }
  clock.end_phase(Phase::data);
  w.batches->copy_to_device(batch);
  w.recipe->prepare_batch(batch);
  clock.end_phase(Phase::h2d);
  return batch;
}

// One training step, the same on every rank: per micro-batch data, forward
// and backward (the phases sum over the micro-batches); then the recipe
// (unscale, clip, lr) and the optimizer. Returns the step's loss: the mean
// over its micro-batches.
//
// A data-parallel run synchronises gradients in the last micro-batch only
// (DDP's no_sync on the others). With the Reducer, backward ends when the
// last bucket is handed to the hook (every gradient computed), and the rest
// of backward is the comm phase: the communication backward did not hide.
// With reducer = "after_backward" the comm phase is the reduction after it.
torch::Tensor train_step(Workload& w, PhaseClock& clock, std::int64_t step) {
  torch::optim::Optimizer& optimizer = w.optimizer->get();
  torch::Tensor step_loss;
  for (std::int64_t micro = 0; micro < w.accumulate; ++micro) {
    const bool sync = micro == w.accumulate - 1;
    if (w.sync) w.sync->before_forward(sync);
    const Batch batch = next_batch(w, clock);
    torch::Tensor loss;
    {
      const auto autocast = w.recipe->autocast();
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
    torch::Tensor backward_loss = w.recipe->loss_for_backward(loss);
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
  if (w.recipe->before_step(step))
    call_plugin(*w.optimizer_plugin, "step", [&] { optimizer.step(); });
  w.recipe->after_step();
  w.optimizer->on_step_end(step);
  clock.end_phase(Phase::optimizer);
  return step_loss;  // read with item() after the step's clock stops
}

// A held-out evaluation after `steps` steps; the last one's values are also
// the run's eval_* metrics.
void evaluate(Workload& w, std::int64_t steps, RunOutcome& out) {
  const auto means = w.evaluator->evaluate(*w.model, *w.recipe, steps, out.evaluations);
  out.metrics.erase(std::remove_if(out.metrics.begin(), out.metrics.end(),
                                   [](const store::Metric& m) { return m.name.starts_with("eval_"); }),
                    out.metrics.end());
  for (const auto& [metric, value] : means) out.metrics.push_back({"eval_" + metric, value, ""});
}

// Per run, from the per-step records: the distribution of the gradient norm
// (clipping), and under amp_fp16 the skipped steps and the last loss scale.
void add_recipe_metrics(RunOutcome& out, const Recipe& recipe) {
  std::vector<double> norms;
  std::int64_t skipped = 0;
  double last_scale = std::nan("");
  for (const auto& s : out.samples) {
    if (s.measured() && !std::isnan(s.grad_norm)) norms.push_back(s.grad_norm);
    if (s.skipped == 1) ++skipped;
    if (!std::isnan(s.loss_scale)) last_scale = s.loss_scale;
  }
  if (!norms.empty()) out.summaries.push_back(store::summarize("grad_norm", "", std::move(norms)));
  if (recipe.scales_loss()) {
    out.metrics.push_back({"skipped_steps", static_cast<double>(skipped), "count"});
    if (!std::isnan(last_scale)) out.metrics.push_back({"loss_scale_final", last_scale, ""});
  }
}

// With the Reducer, backward's phase ends when every gradient is computed.
void mark_backward_end(Workload& w, PhaseClock& clock) {
  if (!w.sync) return;
  w.sync->on_gradients_computed([&w, &clock] {
    clock.end_phase(Phase::backward);
    w.gradients_computed = true;
  });
}

// [profile] steps: the profiler of this run's loop; null when it does not
// profile (then nothing of the profiler is touched).
std::unique_ptr<StepProfiler> make_profiler(const RunRequest& request) {
  const ProfileSettings& p = request.experiment->profile;
  if (!p.enabled()) return nullptr;
  const bool cuda = resolve_device(request.experiment->device.type) == "cuda";
  return std::make_unique<StepProfiler>(p.steps, p.record_shapes, cuda, request.profile_trace);
}

void train_loop(const RunRequest& request, Workload& w, PhaseClock& clock, RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  w.model->module().train();
  mark_backward_end(w, clock);
  std::int64_t evaluated_at = -1;
  // After each recorded step, outside its timing: what the recipe did (a
  // read of the device), then a held-out evaluation when one is due.
  const std::function<void(std::int64_t)> after_step = [&](std::int64_t done) {
    if (!out.samples.empty()) w.recipe->record(out.samples.back());
    if (!w.evaluator || exp.eval.every <= 0 || done % exp.eval.every != 0) return;
    evaluate(w, done, out);
    evaluated_at = done;
  };
  const std::unique_ptr<StepProfiler> profiler = make_profiler(request);
  const std::int64_t done =
      run_steps(request, clock, exp.train.warmup, exp.train.steps,
                [&](std::int64_t step) { return train_step(w, clock, step); }, out, after_step,
                profiler.get());
  // At the end too, when the run finished (a diverged model has nothing to
  // evaluate; an interrupted run should stop now). Weights are saved from an
  // interrupted run as well: it may have trained for hours.
  const bool finished = out.status == store::RunStatus::finished;
  if (w.evaluator && finished && done > 0 && evaluated_at != done) evaluate(w, done, out);
  add_recipe_metrics(out, *w.recipe);
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
  run_steps(request, clock, exp.infer.warmup, exp.infer.batches,
            [&](std::int64_t) {
              const Batch batch = next_batch(w, clock);
              const auto autocast = w.recipe->autocast();
              (void)w.model->forward(batch);
              clock.end_phase(Phase::forward);
              return torch::Tensor();
            },
            out, {}, profiler.get());
  inference.reset();
  no_grad.reset();
  if (w.evaluator && out.status == store::RunStatus::finished) evaluate(w, 0, out);
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
  // Before the first tensor: every CPU storage of the run is then counted.
  recipes::cpu_memory::install();
  const DeviceSettings& d = experiment.device;
  if (d.threads > 0) at::set_num_threads(static_cast<int>(d.threads));
  if (d.interop_threads > 0) at::set_num_interop_threads(static_cast<int>(d.interop_threads));
  at::Context& context = at::globalContext();
  if (d.cudnn_benchmark) context.setBenchmarkCuDNN(*d.cudnn_benchmark);
  if (d.deterministic) {
    // Deterministic cuBLAS needs a fixed workspace (CUDA's documented
    // setting), read when cuBLAS starts: set it unless the user did.
    if (*d.deterministic) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    context.setDeterministicAlgorithms(*d.deterministic, /*warn_only=*/false);
  }
  if (d.tf32_matmul) context.setAllowTF32CuBLAS(*d.tf32_matmul);
  if (d.tf32_conv) context.setAllowTF32CuDNN(*d.tf32_conv);
  if (!d.float32_matmul_precision.empty())
    context.setFloat32MatmulPrecision(d.float32_matmul_precision);
  // Read back: a thread count asked for, by the file or by OMP_NUM_THREADS
  // in [env], is the one LibTorch uses.
  std::int64_t intra = d.threads;
  std::string asked_by = "device.threads";
  if (intra == 0)
    for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"})
      if (const auto it = experiment.env.find(name); it != experiment.env.end() && intra == 0)
        if (const auto n = parse_int64(it->second); n && *n > 0) {
          intra = *n;
          asked_by = std::string("[env] ") + name;
        }
  if (intra > 0 && at::get_num_threads() != intra)
    throw Error("the run process uses " + std::to_string(at::get_num_threads()) +
                    " intra-op threads, not " + std::to_string(intra) + " as " + asked_by +
                    " asks",
                {}, ErrorKind::run);
  if (d.interop_threads > 0 &&
      static_cast<std::int64_t>(at::get_num_interop_threads()) != d.interop_threads)
    throw Error("the run process uses " + std::to_string(at::get_num_interop_threads()) +
                    " inter-op threads, not " + std::to_string(d.interop_threads) +
                    " as device.interop_threads asks",
                {}, ErrorKind::run);
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
    best_ns = std::min(best_ns, clock->end_step().phase_ns[store::phase_index(Phase::forward)]);
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) /
         (best_ns * 1e-9);
}

double measure_peak_bytes_per_s(const std::string& device_name) {
  const torch::Device device(device_name);
  const std::int64_t bytes = device.is_cuda() ? (std::int64_t{1} << 30) : (std::int64_t{256} << 20);
  c10::InferenceMode guard;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  const torch::Tensor src = torch::rand({bytes / 4}, options);
  torch::Tensor dst = torch::empty({bytes / 4}, options);
  dst.copy_(src);  // warm-up: first touch of the pages, thread pool
  auto clock = make_phase_clock(device_name);
  double best_ns = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 5; ++i) {
    clock->begin_step();
    dst.copy_(src);
    clock->end_phase(Phase::forward);
    best_ns = std::min(best_ns, clock->end_step().phase_ns[store::phase_index(Phase::forward)]);
  }
  return 2.0 * static_cast<double>(bytes) / (best_ns * 1e-9);
}

std::uint64_t run_seed(const Experiment& experiment, std::int64_t) {
  return static_cast<std::uint64_t>(experiment.seed);
}

namespace {

// The device of this rank: with NCCL, local rank r uses CUDA device r.
torch::Device rank_device(const std::string& device_name, const RankInfo& rank) {
  torch::Device device(device_name);
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda() && rank.rendezvous != nullptr) {
    const int local = rank.rendezvous->local_rank >= 0 ? rank.rendezvous->local_rank : rank.rank();
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local));
    c10::cuda::set_device(device.index());
  }
#else
  static_cast<void>(rank);
#endif
  return device;
}

// Straggler figures of a data-parallel run from every rank's step times:
// per step, the slowest rank's time and the median rank's (in the samples;
// over the measured steps, the summaries rank_step_max, rank_step_median
// and straggler_ratio, their ratio per step), and which rank was the
// slowest most often.
void add_straggler_metrics(RunOutcome& out, std::vector<std::vector<double>> per_rank) {
  per_rank[0].clear();
  for (const auto& sample : out.samples) per_rank[0].push_back(sample.wall_ns);
  std::vector<std::vector<double>> reported;
  std::vector<std::size_t> ranks;  // which rank each row of `reported` is
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    if (!per_rank[r].empty()) {
      reported.push_back(std::move(per_rank[r]));
      ranks.push_back(r);
    }
  out.metrics.push_back({"ranks_reporting_times", static_cast<double>(reported.size()), "count"});
  const StragglerSteps steps =
      straggler_steps(reported, std::vector<bool>(out.samples.size(), true));
  std::vector<double> max, median, ratio;
  std::vector<std::int64_t> slowest_count(per_rank.size());
  for (std::size_t i = 0; i < steps.max_ns.size(); ++i) {
    store::Sample& sample = out.samples[i];
    sample.rank_max_ns = steps.max_ns[i];
    sample.rank_median_ns = steps.median_ns[i];
    if (!sample.measured()) continue;
    max.push_back(steps.max_ns[i]);
    median.push_back(steps.median_ns[i]);
    ratio.push_back(steps.median_ns[i] > 0 ? steps.max_ns[i] / steps.median_ns[i] : 1.0);
    ++slowest_count[ranks[static_cast<std::size_t>(steps.slowest_rank[i])]];
  }
  if (max.empty()) return;
  const double measured = static_cast<double>(max.size());
  out.summaries.push_back(store::summarize("rank_step_max", "ns", std::move(max)));
  out.summaries.push_back(store::summarize("rank_step_median", "ns", std::move(median)));
  out.summaries.push_back(store::summarize("straggler_ratio", "", std::move(ratio)));
  const auto most = std::max_element(slowest_count.begin(), slowest_count.end());
  out.metrics.push_back({"slowest_rank", static_cast<double>(most - slowest_count.begin()), ""});
  out.metrics.push_back({"slowest_rank_share", static_cast<double>(*most) / measured, ""});
}

// Builds the run's workload, runs its loop and computes its figures (into
// `out`). A failure of this rank's own is recorded in the run's store before
// the workload, and with it the process group, is destroyed: the other ranks
// then read why their collectives broke.
void run_workload(const RunRequest& request, const RankInfo& rank, torch::Device device,
                  std::uint64_t seed, Clock::time_point run_start, RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  const std::string device_name = device.is_cuda() ? "cuda" : "cpu";
  Workload w;
  try {
    build(w, exp, *request.host, seed, device, rank);
    if (w.init_file) {
      out.files.push_back(*w.init_file);
      out.metrics.push_back({"init_skipped", static_cast<double>(w.skipped.size()), "count"});
    }
    for (auto& file : model_files(exp)) out.files.push_back(std::move(file));
    for (const auto& [key, value] : w.model->provenance())
      out.attributes.push_back({"model." + key, value});
    // Before anything is timed: a path that computes something else fails here.
    if (!exp.model_settings.check_against.empty())
      out.files.push_back(check_outputs(exp, *w.model, *w.recipe, device, out.metrics));
    if (exp.eval.enabled) w.evaluator = std::make_unique<Evaluator>(exp, *request.host, seed, device);
    auto clock = make_phase_clock(device_name);
    out.metrics.push_back({"setup_s", seconds_between(run_start, Clock::now()), "s"});
    out.metrics.push_back(
        {"parameters", static_cast<double>(w.model->parameter_count()), "count"});
    if (const auto flops = w.model->flops_per_sample())
      out.metrics.push_back({"flops_per_sample", *flops, "flop"});
    if (exp.kind == RunKind::train) {
      train_loop(request, w, *clock, out);
      summarize(out, "step_time");
    } else {
      infer_loop(request, w, *clock, out);
      summarize(out, "latency");
    }
    const std::int64_t world = rank.world_size();
    add_throughput(out, w.batch_size * w.accumulate * world);  // every micro-batch's samples
    if (w.batches->from_loader())
      add_pipeline_metrics(out, w.batches->pipeline().stats(), w.loader->skipped(),
                           exp.data_settings.on_error == "skip");
    if (w.sync) add_comm_metrics(out, w, world);
    double samples_per_s = std::nan("");
    for (const auto& m : out.metrics)
      if (m.name == "samples_per_s") samples_per_s = m.value;
    if (const auto tokens = w.model->tokens_per_sample(); tokens && !std::isnan(samples_per_s))
      out.metrics.push_back({"tokens_per_s", *tokens * samples_per_s, "1/s"});
    if (const auto flops = w.model->flops_per_sample(); flops && !std::isnan(samples_per_s)) {
      // Training does forward + backward, about 3x the forward FLOPs.
      const double factor = exp.kind == RunKind::train ? 3.0 : 1.0;
      // Per rank, against one device's peak.
      const double achieved = factor * *flops * samples_per_s / static_cast<double>(world);
      out.metrics.push_back({"achieved_flop_per_s", achieved, "flop/s"});
      if (request.peak_flop_per_s && *request.peak_flop_per_s > 0)
        out.metrics.push_back({"fraction_of_peak", achieved / *request.peak_flop_per_s, ""});
    }
    // The other ranks stop where rank 0 stopped (they learn it when its
    // process group closes, as this function returns, if not before).
    if (rank.link) rank.link->finish(static_cast<std::int64_t>(out.samples.size()));
  } catch (const Error& e) {
    if (rank.link) rank.link->fail(e.what());
    throw;
  }
}

// One rank's run (the only rank outside [distributed]): build, loop,
// summarise. `own_failure` is set when the run failed by its own fault (an
// error of runner, a plugin or the data), not by a collective.
RunOutcome run_rank(const RunRequest& request, const RankInfo& rank, bool* own_failure = nullptr) {
  const Experiment& exp = *request.experiment;
  RunOutcome out;
  out.status = store::RunStatus::finished;
  const auto run_start = Clock::now();
  // Peak memory from here on: the model, its optimizer state, activations.
  if (recipes::cpu_memory::installed()) recipes::cpu_memory::reset_peak();
  std::optional<int> cuda_index;
  try {
    const std::uint64_t seed = run_seed(exp, request.repeat_index);
    torch::manual_seed(seed);
    const torch::Device device = rank_device(resolve_device(exp.device.type), rank);
    if (device.is_cuda()) {
      cuda_index = device.index() < 0 ? 0 : device.index();
      recipes::cuda_memory::reset_peak(*cuda_index);
    }
    run_workload(request, rank, device, seed, run_start, out);
    if (rank.link) add_straggler_metrics(out, rank.link->collect_step_times());
  } catch (const Error& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what();
    if (own_failure) *own_failure = true;
    if (rank.link) rank.link->fail(out.error);
  } catch (const std::exception& e) {
    out.status = store::RunStatus::failed;
    out.error = message_of(e);
  }
  out.metrics.push_back({"peak_rss_bytes", peak_rss_bytes(), "B"});
  // Live tensor bytes at their highest during the run, per device (see
  // runner/recipes/memory.hpp for what is counted).
  if (recipes::cpu_memory::installed())
    out.metrics.push_back({"peak_cpu_alloc_bytes",
                           static_cast<double>(recipes::cpu_memory::peak_bytes()), "B"});
  if (cuda_index)
    out.metrics.push_back({"peak_cuda_allocated_bytes",
                           static_cast<double>(recipes::cuda_memory::peak_bytes(*cuda_index)),
                           "B"});
  out.metrics.push_back({"run_s", seconds_between(run_start, Clock::now()), "s"});
  return out;
}

// The steps the other ranks run without hearing from rank 0: all of them
// when the warm-up is a fixed count; with "auto" warm-up, until rank 0 ends
// the run (its process group closes and the next collective fails).
std::int64_t steps_to_run(const Experiment& exp) {
  if (exp.train.warmup < 0) return std::numeric_limits<std::int64_t>::max();
  return exp.train.warmup + exp.profile.steps + exp.train.steps;
}

// Ranks 1..N-1: the same steps as rank 0, each timed for the straggler
// figures but not recorded, until the count rank 0 ran. Returns "" when the
// run ended normally, else this rank's failure. A failure caused by another
// rank (a collective broken because that rank died or failed) returns ""
// when `quiet_when_caused` (rank 0 reports the cause), else the cause.
std::string run_worker(const RunRequest& request, const Rendezvous& rendezvous,
                       const Companions* companions) {
  const Experiment& exp = *request.experiment;
  std::unique_ptr<RankLink> link;
  std::vector<double> times;
  const auto end_normally = [&](std::int64_t steps) {
    times.resize(std::min(times.size(), static_cast<std::size_t>(std::max<std::int64_t>(steps, 0))));
    link->post_step_times(times);
    return std::string();
  };
  try {
    link = std::make_unique<RankLink>(rendezvous);
    const RankInfo rank{&rendezvous, link.get()};
    const std::uint64_t seed = run_seed(exp, request.repeat_index);
    torch::manual_seed(seed);
    const std::string device_name = resolve_device(exp.device.type);
    {
      Workload w;
      try {
        build(w, exp, *request.host, seed, rank_device(device_name, rank), rank);
        w.model->module().train();
        auto clock = make_phase_clock(device_name);
        mark_backward_end(w, *clock);
        // A diverging loss is rank 0's to report: the parameters are the same everywhere.
        const std::int64_t limit = steps_to_run(exp);
        for (std::int64_t step = 0; step < limit; ++step) {
          clock->begin_step();
          (void)train_step(w, *clock, step);
          times.push_back(clock->end_step().wall_ns);
        }
      } catch (const Error& e) {
        link->fail(e.what());  // before the group closes: the others read it
        throw;
      }
    }
    // Rank 0 may still evaluate or save weights: wait as long as it lives.
    for (;;) {
      if (const auto done = link->finished_steps(rendezvous.timeout)) return end_normally(*done);
      if (link->lost(0))
        return "lost " + link->describe(0) + " after this rank's last step: no heartbeat";
    }
  } catch (const Error& e) {
    if (companions != nullptr && companions->stopping()) return "";
    if (!link) return e.what();
    link->fail(e.what());
    // Forked ranks: rank 0 reports it from the store (a crash, which leaves
    // nothing there, from the rank's exit status).
    return companions != nullptr ? std::string() : std::string(e.what());
  } catch (const std::exception& e) {
    if (companions != nullptr && companions->stopping()) return "";
    if (!link) return message_of(e);
    // The usual end with "auto" warm-up: rank 0 finished and closed its group.
    if (const auto done = link->finished_steps(std::chrono::milliseconds(0)))
      return end_normally(*done);
    const std::string raw = message_of(e);
    const std::string why = link->explain_failure();
    if (const auto done = link->finished_steps(std::chrono::milliseconds(0)))
      return end_normally(*done);
    if (why.empty()) {
      link->fail(raw);
      return companions != nullptr ? std::string() : raw;
    }
    // Another rank's failure: rank 0 reports it (a forked rank stays quiet).
    if (companions != nullptr) return "";
    return why + " (rank " + std::to_string(rendezvous.rank) + ": " +
           raw.substr(0, raw.find('\n')) + ")";
  }
}

// The final error of a failed data-parallel run, from rank 0's: what the
// forked ranks reported, else what the store says about the other ranks
// (a rank's recorded failure, a rank whose heartbeat stopped).
std::string explain_distributed_failure(const RunOutcome& out, bool own_failure, RankLink* link,
                                        Companions* companions) {
  std::string why;
  if (!own_failure && link != nullptr) {
    why = link->explain_failure();  // before the forked ranks are stopped
    if (why.empty()) link->fail(out.error);
  }
  // What the store says first; then how forked ranks ended, when that says
  // more (a crash: "rank 1 was killed by signal 11 (Segmentation fault)").
  std::string error = why;
  if (companions != nullptr) {
    companions->stop();
    for (const auto& f : companions->failures()) error += (error.empty() ? "" : "; ") + f;
  }
  if (error.empty()) return out.error;
  return error + " (rank 0: " + out.error + ")";
}

// A [distributed] run. Rank 0 is this process, which measures and reports.
// Without a launcher, ranks 1..N-1 are forked from it before it runs any
// operator (so no thread exists yet) and meet it through a FileStore; in a
// launched job they are processes of the job (execute_rank), met through
// the job's TCPStore.
RunOutcome run_distributed(const RunRequest& request) {
  const Experiment& exp = *request.experiment;
  Rendezvous rendezvous;
  std::filesystem::path store;
  std::error_code ignored;
  if (request.job) {
    rendezvous = *request.job;
  } else {
    rendezvous.world_size = static_cast<int>(exp.distributed.world_size);
    rendezvous.timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(exp.distributed.timeout_s * 1000.0));
    store = std::filesystem::temp_directory_path() /
            ("runner-rendezvous-" + std::to_string(::getpid()) + ".store");
    std::filesystem::remove(store, ignored);
    rendezvous.store_path = store.string();
  }
  // Before the first rank is forked, so every rank inherits it.
  const IgnoredSignal no_broken_pipe(SIGPIPE);
  std::optional<Companions> companions;
  RunOutcome out;
  bool own_failure = false;
  std::unique_ptr<RankLink> link;
  try {
    if (!request.job) {
      companions.emplace();
      for (int r = 1; r < rendezvous.world_size; ++r) {
        Rendezvous mine = rendezvous;
        mine.rank = r;
        companions->spawn("rank " + std::to_string(r), [&request, mine, &companions] {
          return run_worker(request, mine, &*companions);
        });
      }
    }
    link = std::make_unique<RankLink>(rendezvous);
    out = run_rank(request, RankInfo{&rendezvous, link.get()}, &own_failure);
  } catch (const Error& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what();
    own_failure = true;
    if (link) link->fail(out.error);
  }
  if (out.status == store::RunStatus::failed) {
    out.error = explain_distributed_failure(out, own_failure, link.get(),
                                            companions ? &*companions : nullptr);
  } else if (companions) {
    companions->stop();  // they have posted their times and are ending
    if (!companions->failures().empty() && out.status != store::RunStatus::interrupted) {
      std::string error;
      for (const auto& f : companions->failures()) error += (error.empty() ? "" : "; ") + f;
      out.status = store::RunStatus::failed;
      out.error = error;
    }
  }
  link.reset();
  if (!store.empty()) std::filesystem::remove(store, ignored);
  return out;
}

}  // namespace

std::string execute_rank(const RunRequest& request, const Rendezvous& rendezvous) {
  const IgnoredSignal no_broken_pipe(SIGPIPE);
  return run_worker(request, rendezvous, nullptr);
}

RunOutcome execute_run(const RunRequest& request) {
  const Experiment& exp = *request.experiment;
  if (exp.kind == RunKind::kernel) return run_kernel(request);
  if (exp.kind == RunKind::train && exp.distributed.enabled) return run_distributed(request);
  return run_rank(request, RankInfo{});
}

}  // namespace runner
