// Kernel experiments: correctness first, then timing (docs/kernels.md).
#include "kernel_run.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Version.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include "errors.hpp"
#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/statistics.hpp"
#include "runner/engine/phase_clock.hpp"
#include "runner/engine/step_loop.hpp"
#include "runner/fingerprint/fingerprint.hpp"
#include "runner/host/host.hpp"
#include "runner/kernel.hpp"

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

torch::ScalarType dtype_named(const std::string& name) {
  if (name == "float64") return torch::kFloat64;
  if (name == "bfloat16") return torch::kBFloat16;
  if (name == "float16") return torch::kFloat16;
  return torch::kFloat32;
}

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat16: return "float16";
    default: return c10::toString(dtype);
  }
}

std::string shape_of(c10::IntArrayRef shape) {
  return shape_text(std::span<const std::int64_t>(shape.data(), shape.size()));
}

// A figure in a message: 3 significant digits ("0.0123", "1e-06").
std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// The plugin's case, its option errors reported at the option.
KernelCase make_case(const Experiment& exp, const PluginHost& host) {
  try {
    return host.make_kernel(exp.kernel->plugin, exp.kernel->options);
  } catch (const PluginOptionError& e) {
    rethrow_at_option(e, *exp.kernel);
  }
}

// "qualified::name" or "qualified::name.overload" as the dispatcher's key.
c10::OperatorName operator_name(const std::string& op) {
  const auto dot = op.find('.', op.find("::") == std::string::npos ? 0 : op.find("::"));
  if (dot == std::string::npos) return c10::OperatorName(op, "");
  return c10::OperatorName(op.substr(0, dot), op.substr(dot + 1));
}

// The CUDA generator of the run's device, or the CPU one, seeded.
at::Generator generator_for(const torch::Device& device, std::uint64_t seed) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda()) {
    at::Generator gen = at::cuda::detail::createCUDAGenerator(device.index() < 0 ? 0 : device.index());
    gen.set_current_seed(seed);
    return gen;
  }
#endif
  return at::detail::createCPUGenerator(seed);
}

// The bytes the rotation must exceed so that a buffer's data has left the
// cache by the time it is used again: the CPU's last-level cache, or the
// GPU's L2.
std::int64_t cache_bytes(const torch::Device& device) {
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda())
    return at::cuda::getDeviceProperties(device.index() < 0 ? 0 : device.index())->l2CacheSize;
#endif
  static_cast<void>(device);
  return last_level_cache_bytes();
}

std::int64_t bytes_of(const KernelInputs& inputs) {
  std::int64_t total = 0;
  for (const auto& t : inputs)
    if (t.defined()) total += static_cast<std::int64_t>(t.nbytes());
  return total;
}

/// How far an output is from its float64 reference.
struct Deviation {
  double rel_error = 0;      ///< max|y - ref| / max|ref| over the elements that are not NaN
  std::int64_t nan = 0;      ///< elements that are NaN in y but not in ref
  std::int64_t numel = 0;
};

Deviation deviation(const torch::Tensor& y, const torch::Tensor& ref) {
  Deviation d;
  d.numel = ref.numel();
  const torch::Tensor y64 = y.to(torch::kFloat64);
  const torch::Tensor bad = torch::isnan(y64).logical_and(torch::isnan(ref).logical_not());
  d.nan = bad.sum().item<std::int64_t>();
  if (d.numel == 0) return d;
  const torch::Tensor diff = (y64 - ref).abs().masked_fill(bad, 0.0);
  double scale = ref.abs().max().item<double>();
  if (!(scale > 0)) scale = 1.0;
  d.rel_error = diff.max().item<double>() / scale;
  return d;
}

KernelInputs as_float64(const KernelInputs& inputs) {
  KernelInputs out;
  for (const auto& t : inputs)
    out.push_back(t.defined() && t.is_floating_point() ? t.to(torch::kFloat64) : t);
  return out;
}

// Raised for a gate that fails: the run is recorded failed, not timed.
struct GateFailure {
  std::string message;
};

class KernelBench {
 public:
  KernelBench(const RunRequest& request, KernelCase kernel, torch::Device device)
      : request_(request),
        exp_(*request.experiment),
        settings_(exp_.kernel_settings),
        kernel_(std::move(kernel)),
        device_(device),
        dtype_(dtype_named(settings_.dtype)),
        generator_(generator_for(device, static_cast<std::uint64_t>(run_seed(exp_, request.repeat_index)))) {}

  /// Inputs from the plugin, checked to be random.
  KernelInputs inputs() {
    KernelInputs in = kernel_.make_inputs(settings_.shape, dtype_, device_, generator_);
    if (in.empty())
      throw Error("kernel plugin '" + exp_.kernel->plugin + "' made no inputs", {},
                  ErrorKind::run);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const torch::Tensor& t = in[i];
      if (!t.defined() || !t.is_floating_point() || t.numel() < 2) continue;
      if (t.device() != device_)
        throw Error("kernel plugin '" + exp_.kernel->plugin + "' made input " +
                        std::to_string(i) + " on " + t.device().str() + ", not on " +
                        device_.str(),
                    "make_inputs must put every input on the device it is given", ErrorKind::run);
      const torch::Tensor flat = t.detach().reshape(-1);
      if (flat.max().item<double>() == flat.min().item<double>())
        throw Error("kernel plugin '" + exp_.kernel->plugin + "' made input " +
                        std::to_string(i) + " with every element equal to " +
                        figure(flat[0].item<double>()),
                    "inputs must be random: constant values hide wrong indexing",
                    ErrorKind::run);
    }
    return in;
  }

  /// An output for `in`, filled with NaN (custom and native only).
  torch::Tensor poisoned_output(const KernelInputs& in) {
    torch::Tensor out = kernel_.make_output(in);
    if (!out.defined())
      throw Error("kernel plugin '" + exp_.kernel->plugin + "' made no output tensor", {},
                  ErrorKind::run);
    out.fill_(std::numeric_limits<double>::quiet_NaN());
    return out;
  }

  /// One call of the implementation under test; `out` is unused by "eager".
  void call(const KernelInputs& in, torch::Tensor& out) {
    if (settings_.impl == "custom") {
      kernel_.custom(in, out);
    } else if (settings_.impl == "native") {
      kernel_.native(in, out);
    } else {
      (void)kernel_.reference(in);
    }
  }

  /// The correctness gate; throws GateFailure. Records the error figures.
  void check(const KernelInputs& in, RunOutcome& out) {
    const torch::Tensor reference = kernel_.reference(as_float64(in));
    torch::Tensor y;
    if (settings_.impl == "eager") {
      y = kernel_.reference(in);
    } else {
      y = poisoned_output(in);
      call(in, y);
    }
    if (y.sizes() != reference.sizes())
      throw GateFailure{"its output has shape " + shape_of(y.sizes()) +
                        ", the reference's is " + shape_of(reference.sizes())};
    const Deviation d = deviation(y, reference);
    const double tolerance = tolerance_of(kernel_.tolerance);
    out.metrics.push_back({"max_rel_error", d.rel_error, ""});
    out.metrics.push_back({"tolerance", tolerance, ""});
    out.metrics.push_back({"nan_outputs", static_cast<double>(d.nan), "count"});
    if (d.nan > 0)
      throw GateFailure{std::to_string(d.nan) + " of " + std::to_string(d.numel) +
                        " output elements are NaN after the call (the output was filled with "
                        "NaN before it: elements left unwritten, or computed as NaN)"};
    if (!(d.rel_error <= tolerance))
      throw GateFailure{"max relative error " + figure(d.rel_error) + " > tolerance " +
                        figure(tolerance) + " against the float64 reference"};
    if (settings_.impl == "custom" && kernel_.differentiable) check_gradients(in, out);
  }

  void check_gradients(const KernelInputs& in, RunOutcome& out) {
    std::vector<std::size_t> wrt;
    for (const std::size_t i : kernel_.grad_inputs)
      if (i < in.size() && in[i].defined() && in[i].is_floating_point()) wrt.push_back(i);
    if (wrt.empty()) return;
    const auto differentiate = [&](const KernelInputs& base, bool reference,
                                   const torch::Tensor& seed) {
      KernelInputs leaves = base;
      std::vector<torch::Tensor> targets;
      for (const std::size_t i : wrt) {
        leaves[i] = base[i].detach().clone().requires_grad_(true);
        targets.push_back(leaves[i]);
      }
      const torch::Tensor y = reference ? kernel_.reference(leaves) : kernel_.differentiable(leaves);
      return torch::autograd::grad({y}, targets, {seed.to(y.scalar_type())});
    };
    const torch::Tensor shape_of_output = kernel_.make_output(in);
    const torch::Tensor seed =
        torch::randn(shape_of_output.sizes(), generator_, shape_of_output.options());
    const auto grads = differentiate(in, false, seed);
    const auto expected = differentiate(as_float64(in), true, seed.to(torch::kFloat64));
    const double tolerance = tolerance_of(kernel_.grad_tolerance.empty() ? kernel_.tolerance
                                                                           : kernel_.grad_tolerance);
    double worst = 0;
    for (std::size_t k = 0; k < wrt.size(); ++k) {
      if (!grads[k].defined())
        throw GateFailure{"its backward gives no gradient for input " + std::to_string(wrt[k])};
      if (grads[k].sizes() != expected[k].sizes())
        throw GateFailure{"its gradient of input " + std::to_string(wrt[k]) + " has shape " +
                          shape_of(grads[k].sizes()) + ", the reference's is " +
                          shape_of(expected[k].sizes())};
      const Deviation d = deviation(grads[k], expected[k]);
      const double error = d.nan > 0 ? std::numeric_limits<double>::infinity() : d.rel_error;
      worst = std::max(worst, error);
      if (!(error <= tolerance)) {
        out.metrics.push_back({"grad_max_rel_error", worst, ""});
        throw GateFailure{"its gradient of input " + std::to_string(wrt[k]) +
                          (d.nan > 0 ? " has " + std::to_string(d.nan) + " NaN elements"
                                     : " has max relative error " + figure(error) +
                                           " > tolerance " + figure(tolerance)) +
                          " against the float64 reference's"};
      }
    }
    out.metrics.push_back({"grad_max_rel_error", worst, ""});
  }

  /// Warm-up and measured calls over `sets` rotated call by call.
  void time(std::vector<KernelInputs>& sets, std::vector<torch::Tensor>& outputs, RunOutcome& out) {
    auto clock = make_phase_clock(device_.is_cuda() ? "cuda" : "cpu");
    const c10::InferenceMode no_autograd;
    const std::size_t n = sets.size();
    run_steps(request_, *clock, settings_.warmup, settings_.calls,
              [&](std::int64_t step) {
                const std::size_t i = static_cast<std::size_t>(step) % n;
                call(sets[i], outputs[i]);
                clock->end_phase(Phase::forward);  // on a GPU: the event after the call
                return torch::Tensor();
              },
              out);
  }

  double tolerance_of(const std::map<torch::ScalarType, double>& table) const {
    const auto it = table.find(dtype_);
    return it == table.end() ? 0.0 : it->second;
  }

  const KernelCase& kernel() const { return kernel_; }

 private:
  const RunRequest& request_;
  const Experiment& exp_;
  const KernelSettings& settings_;
  KernelCase kernel_;
  torch::Device device_;
  torch::ScalarType dtype_;
  at::Generator generator_;
};

// Per measured call, from the samples: the call time's distribution.
void summarize_calls(RunOutcome& out) {
  std::vector<double> calls;
  for (const auto& s : out.samples)
    if (!s.warmup) calls.push_back(s.wall_ns);
  if (!calls.empty()) out.summaries.push_back(store::summarize("call_time", "ns", std::move(calls)));
}

std::string describe(const Experiment& exp) {
  const KernelSettings& k = exp.kernel_settings;
  return "the " + k.impl + " implementation of kernel '" + exp.kernel->plugin + "' (" + k.dtype +
         " " + shape_text(k.shape) + ")";
}

}  // namespace

void check_kernel_before_runs(const Experiment& exp, const PluginHost& host,
                              const std::string& device) {
  const KernelCase kernel = make_case(exp, host);
  const PluginChoice& choice = *exp.kernel;
  const KernelSettings& settings = exp.kernel_settings;
  // What runner needs from every kernel plugin.
  const std::vector<std::pair<const char*, bool>> required = {
      {"check_shape", static_cast<bool>(kernel.check_shape)},
      {"make_inputs", static_cast<bool>(kernel.make_inputs)},
      {"make_output", static_cast<bool>(kernel.make_output)},
      {"custom", static_cast<bool>(kernel.custom)},
      {"native", static_cast<bool>(kernel.native)},
      {"reference", static_cast<bool>(kernel.reference)},
      {"bytes_moved", static_cast<bool>(kernel.bytes_moved)}};
  for (const auto& [name, present] : required)
    if (!present)
      throw Error(choice.where, "kernel plugin '" + choice.plugin + "' leaves KernelCase::" +
                                    name + " empty",
                  "its author must set every function but differentiable and flops "
                  "(runner/kernel.hpp)");
  const torch::ScalarType dtype = dtype_named(settings.dtype);
  if (std::find(kernel.dtypes.begin(), kernel.dtypes.end(), dtype) == kernel.dtypes.end()) {
    std::vector<std::string> names;
    for (const auto d : kernel.dtypes) names.push_back(dtype_name(d));
    throw Error(exp.where_of("kernel.dtype"),
                "kernel plugin '" + choice.plugin + "' does not compute in " + settings.dtype,
                names.empty() ? "it declares no dtype" : "its dtypes: " + join(names, ", "));
  }
  if (kernel.tolerance.count(dtype) == 0)
    throw Error(choice.where,
                "kernel plugin '" + choice.plugin + "' declares no tolerance for " + settings.dtype,
                "its author must give KernelCase::tolerance an entry for every dtype it lists");
  if (const std::string why = kernel.check_shape(settings.shape); !why.empty())
    throw Error(exp.where_of("kernel.shape"),
                "kernel plugin '" + choice.plugin + "' cannot take shape " +
                    shape_text(settings.shape) + ": " + why,
                "run 'runner plugins describe " + choice.plugin + "' to see what it computes");
  if (settings.impl != "custom") return;  // the others run ATen's own kernels
  const bool cuda = device == "cuda";
  for (const std::string& op : kernel.ops) {
    const auto handle = c10::Dispatcher::singleton().findOp(operator_name(op));
    if (!handle)
      throw Error(choice.where,
                  "kernel plugin '" + choice.plugin + "' uses op '" + op +
                      "', which no loaded library registers",
                  "load the library that defines it (its TORCH_LIBRARY) with the plugin");
    const bool has = handle->hasKernelForDispatchKey(cuda ? c10::DispatchKey::CUDA
                                                           : c10::DispatchKey::CPU) ||
                     handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                     handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    if (!has)
      throw Error(exp.key_where.count("device.type") != 0 ? exp.where_of("device.type")
                                                           : choice.where,
                  "kernel plugin '" + choice.plugin + "' has no " + (cuda ? "CUDA" : "CPU") +
                      " implementation of op '" + op + "'",
                  cuda ? "run it on the CPU (device.type = \"cpu\"), or build the plugin with "
                         "its CUDA kernels"
                       : "run it on a GPU (device.type = \"cuda\"), or give the op a CPU "
                         "kernel; impl = \"native\" times ATen's composition instead");
  }
}

RunOutcome run_kernel(const RunRequest& request) {
  const Experiment& exp = *request.experiment;
  const KernelSettings& settings = exp.kernel_settings;
  RunOutcome out;
  out.status = store::RunStatus::finished;
  const auto run_start = Clock::now();
  try {
    torch::Device device(resolve_device(exp.device.type));
    if (device.is_cuda() && device.index() < 0) device = torch::Device(torch::kCUDA, 0);
    KernelBench bench(request, make_case(exp, *request.host), device);
    // 1. Correctness, before anything is timed.
    KernelInputs first = bench.inputs();
    try {
      bench.check(first, out);
    } catch (const GateFailure& failure) {
      throw Error(describe(exp) + " is wrong: " + failure.message + "; not timed", {},
                  ErrorKind::run);
    }
    // 2. Buffers: enough sets that the data of a call has left the cache
    // before its set comes round again.
    // The output counts for "eager" too: each call writes one (to memory
    // the allocator hands back, likely the block the last call freed).
    const torch::Tensor probe = bench.poisoned_output(first);
    const std::int64_t working_set = bytes_of(first) + static_cast<std::int64_t>(probe.nbytes());
    const std::int64_t cache = cache_bytes(device);
    std::int64_t n = settings.buffers;
    if (n == 0) {
      n = 1;
      if (cache > 0 && working_set > 0 && working_set < 2 * cache)
        n = std::min<std::int64_t>(kMaxKernelBuffers, (2 * cache + working_set - 1) / working_set + 1);
    }
    std::vector<KernelInputs> sets{first};
    std::vector<torch::Tensor> outputs{settings.impl == "eager" ? torch::Tensor() : probe};
    for (std::int64_t i = 1; i < n; ++i) {
      sets.push_back(bench.inputs());
      outputs.push_back(settings.impl == "eager" ? torch::Tensor() : bench.poisoned_output(sets.back()));
    }
    const bool defeated = working_set >= 2 * cache || (n - 1) * working_set >= 2 * cache;
    out.metrics.push_back({"buffers", static_cast<double>(n), "count"});
    out.metrics.push_back({"working_set_bytes", static_cast<double>(working_set), "B"});
    out.metrics.push_back({"cache_bytes", static_cast<double>(cache), "B"});
    out.metrics.push_back({"cache_defeated", defeated ? 1.0 : 0.0, ""});
    out.attributes.push_back({"kernel.cpu_capability", at::get_cpu_capability()});
    if (!bench.kernel().ops.empty())
      out.attributes.push_back({"kernel.ops", join(bench.kernel().ops, " ")});
    out.metrics.push_back({"setup_s", std::chrono::duration<double>(Clock::now() - run_start).count(), "s"});
    // 3. Timing.
    bench.time(sets, outputs, out);
    summarize_calls(out);
    std::int64_t measured = 0;
    for (const auto& s : out.samples) measured += s.warmup ? 0 : 1;
    out.metrics.push_back({"measured_calls", static_cast<double>(measured), "count"});
    const double bytes = bench.kernel().bytes_moved(first);
    const double flops = bench.kernel().flops ? bench.kernel().flops(first) : 0.0;
    out.metrics.push_back({"bytes_per_call", bytes, "B"});
    if (flops > 0) out.metrics.push_back({"flops_per_call", flops, "flop"});
    for (const auto& s : out.summaries) {
      if (s.metric != "call_time" || !(s.p50 > 0)) continue;
      const double seconds = s.p50 * 1e-9;
      out.metrics.push_back({"bandwidth_bytes_per_s", bytes / seconds, "B/s"});
      if (request.peak_bytes_per_s && *request.peak_bytes_per_s > 0)
        out.metrics.push_back(
            {"fraction_of_peak_bandwidth", bytes / seconds / *request.peak_bytes_per_s, ""});
      if (flops > 0) {
        out.metrics.push_back({"flop_per_s", flops / seconds, "flop/s"});
        if (request.peak_flop_per_s && *request.peak_flop_per_s > 0)
          out.metrics.push_back({"fraction_of_peak_flops", flops / seconds / *request.peak_flop_per_s, ""});
      }
    }
  } catch (const Error& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what();
  } catch (const c10::Error& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what();
  }
  out.metrics.push_back({"run_s", std::chrono::duration<double>(Clock::now() - run_start).count(), "s"});
  return out;
}

}  // namespace runner
