// The device and the process a run uses: which device, the process-wide
// LibTorch settings, the device's measured peaks, and a rank's own device.
#include "device.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/types.h>

#ifdef RUNNER_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runner/common/strings.hpp"
#include "runner/engine/phase_clock.hpp"
#include "runner/training/memory.hpp"

namespace runner {

std::string resolve_device(const std::string& type) {
  if (type == "cpu") return "cpu";
  const bool cuda = torch::cuda::is_available();
  if (type == "auto") return cuda ? "cuda" : "cpu";
  if (type == "cuda" && !cuda)
    throw Error("device.type is \"cuda\" but no CUDA device is available",
                "use device.type = \"cpu\" or \"auto\" on this machine");
  return type;
}

namespace {

// glibc gives the top of its heap back to the kernel once more than its trim
// threshold is free there (by default twice the largest block freed from a
// mapping: 16 MB after an 8 MB activation). A training step frees its
// activations at its end and allocates them again in the next, so each step
// paid the page faults of mapping them anew: 6,600 a step for convnet at
// batch 64, 10 % of its time, where a Python process's heap often happens to
// keep them (docs/benchmarks.md, issue 30). A run process keeps up to 1 GiB of
// freed heap instead, and puts blocks up to 32 MB (the most glibc's own
// threshold reaches) on the heap. A user's own glibc malloc settings win.
void keep_freed_heap() {
#ifdef __GLIBC__
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                           "MALLOC_MMAP_MAX_"})
    if (std::getenv(name) != nullptr) return;
  if (const char* tunables = std::getenv("GLIBC_TUNABLES");
      tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr)
    return;
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace

void configure_runtime(const Experiment& experiment) {
  keep_freed_heap();
  // Before the first tensor: every CPU storage of the run is then counted.
  training::cpu_memory::install();
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

torch::Device rank_device(const std::string& device_name, const RankInfo& rank) {
  torch::Device device(device_name);
#ifdef RUNNER_WITH_CUDA
  if (device.is_cuda() && rank.rendezvous != nullptr) {
    const int local = rank.rendezvous->local_rank >= 0 ? rank.rendezvous->local_rank : rank.rank();
    // More local ranks than GPUs share them round-robin (gloo only: NCCL
    // refuses two ranks on one device).
    const int count = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local % count));
    c10::cuda::set_device(device.index());
  }
#else
  static_cast<void>(rank);
#endif
  return device;
}

}  // namespace runner
