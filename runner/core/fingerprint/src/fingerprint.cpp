#include "runner/fingerprint/fingerprint.hpp"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#endif

#include "runner/common/json.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/runtime/runtime.hpp"
#include "runner/sdk.hpp"

namespace runner {

extern const char* const kGitCommit;
extern const bool kGitDirty;

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return trim(line);
}

// The value of the first "key : value" line of a /proc file whose key matches.
std::string proc_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

std::string os_pretty_name() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return {};
}

// ISA extensions that change which kernels LibTorch picks.
std::string cpu_isa_flags() {
  static const std::array<const char*, 14> kInteresting = {
      "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni",
      "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni"};
  std::string flags = proc_field("/proc/cpuinfo", "flags");
  if (flags.empty()) flags = proc_field("/proc/cpuinfo", "Features");  // aarch64
  std::set<std::string> present;
  std::istringstream words(flags);
  for (std::string w; words >> w;) present.insert(w);
  std::vector<std::string> out;
  for (const char* f : kInteresting)
    if (present.count(f)) out.emplace_back(f);
  if (out.empty() && !flags.empty()) return flags;  // non-x86: keep the whole list
  return join(out, " ");
}

std::string cpu_caches() {
  std::vector<std::string> caches;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string size = read_first_line(dir + "size");
    if (size.empty()) break;
    std::string type = read_first_line(dir + "type");
    std::string label = "L" + read_first_line(dir + "level");
    if (type == "Data") label += "d";
    if (type == "Instruction") label += "i";
    caches.push_back(label + "=" + size);
  }
  return join(caches, " ");
}

}  // namespace

std::int64_t last_level_cache_bytes() {
  std::int64_t largest = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string size = read_first_line(dir + "size");
    if (size.empty()) break;
    if (read_first_line(dir + "type") == "Instruction") continue;
    // "32768K", "1M" or a plain byte count.
    std::size_t digits = 0;
    std::int64_t value = 0;
    while (digits < size.size() && size[digits] >= '0' && size[digits] <= '9' && value < (1LL << 40))
      value = value * 10 + (size[digits++] - '0');
    const std::string unit = size.substr(digits);
    if (unit == "K") value <<= 10;
    else if (unit == "M") value <<= 20;
    else if (unit == "G") value <<= 30;
    else if (!unit.empty()) continue;
    largest = std::max(largest, value);
  }
  return largest;
}

namespace {

std::string physical_cores() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> cores;
  std::string line, physical;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    if (key == "physical id") physical = trim(line.substr(colon + 1));
    if (key == "core id") cores.insert(physical + "/" + trim(line.substr(colon + 1)));
  }
  return cores.empty() ? std::string() : std::to_string(cores.size());
}

void add_gpu_fields(std::map<std::string, std::string>& f) {
  // Present (empty) on every machine so fingerprints have one shape.
  for (const char* key : {"gpu.count", "gpu.name", "gpu.capability", "gpu.memory_bytes",
                          "gpu.sm_count", "gpu.driver", "gpu.cuda_runtime", "gpu.cudnn",
                          "gpu.nccl"})
    f[key] = "";
  f["flags.cudnn_benchmark"] = at::globalContext().benchmarkCuDNN() ? "true" : "false";
  f["flags.cudnn_deterministic"] = at::globalContext().deterministicCuDNN() ? "true" : "false";
  f["flags.cuda_matmul_allow_tf32"] = at::globalContext().allowTF32CuBLAS() ? "true" : "false";
  f["flags.cudnn_allow_tf32"] = at::globalContext().allowTF32CuDNN() ? "true" : "false";
#ifdef RUNNER_WITH_CUDA
  if (!torch::cuda::is_available()) return;
  const int count = static_cast<int>(torch::cuda::device_count());
  f["gpu.count"] = std::to_string(count);
  std::vector<std::string> names, caps, mems, sms;
  for (int i = 0; i < count; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(i);
    names.emplace_back(p->name);
    caps.push_back(std::to_string(p->major) + "." + std::to_string(p->minor));
    mems.push_back(std::to_string(p->totalGlobalMem));
    sms.push_back(std::to_string(p->multiProcessorCount));
  }
  f["gpu.name"] = join(names, "; ");
  f["gpu.capability"] = join(caps, "; ");
  f["gpu.memory_bytes"] = join(mems, "; ");
  f["gpu.sm_count"] = join(sms, "; ");
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) f["gpu.driver"] = std::to_string(driver);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    f["gpu.cuda_runtime"] = std::to_string(runtime);
  if (at::detail::getCUDAHooks().hasCuDNN())
    f["gpu.cudnn"] = std::to_string(at::detail::getCUDAHooks().versionCuDNN());
#endif
}

}  // namespace

bool is_performance_env_var(const std::string& name) {
  static const std::array<const char*, 14> kPrefixes = {
      "OMP_",   "MKL_",      "KMP_",     "GOMP_",   "CUDA_",    "CUBLAS_", "CUDNN_",
      "NCCL_",  "TORCH_",    "PYTORCH_", "OPENBLAS_", "DNNL_",  "ONEDNN_", "MALLOC_"};
  for (const char* prefix : kPrefixes)
    if (name.rfind(prefix, 0) == 0) return true;
  return name == "LD_PRELOAD" || name == "LD_LIBRARY_PATH";
}

double load_average_1m() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

std::string Fingerprint::json() const { return canonical_json(nlohmann::json(fields)); }

std::string Fingerprint::hash() const { return sha256_hex(json()); }

namespace {

// Build facts that decide which code a run executes.
void add_build_fields(std::map<std::string, std::string>& f) {
  f["software.runner_version"] = RUNNER_VERSION_STRING;
#ifdef NDEBUG
  f["software.build_type"] = "optimized";
#else
  f["software.build_type"] = "debug";
#endif
  constexpr PluginAbiRecord abi = this_abi_record();
  f["software.cuda_code_paths"] = abi.cuda ? "on" : "off";
  f["software.torch_version"] = TORCH_VERSION;
}

}  // namespace

Fingerprint identity_fingerprint(const std::map<std::string, std::string>& run_env,
                                 const std::string& cpus) {
  Fingerprint fp;
  auto& f = fp.fields;
  add_build_fields(f);
  f["cpu.model"] = proc_field("/proc/cpuinfo", "model name");
  f["cpu.logical_cores"] = std::to_string(std::thread::hardware_concurrency());
  f["cpu.isa"] = cpu_isa_flags();
  f["runtime.cpus"] = cpus;
  std::map<std::string, std::string> env = current_environment();
  for (const auto& [name, value] : run_env) env[name] = value;
  for (const auto& [name, value] : env)
    if (is_performance_env_var(name) || run_env.count(name) != 0) f["env." + name] = value;
  return fp;
}

std::map<std::string, std::string> gpu_identity_fields() {
  std::map<std::string, std::string> all, out;
  add_gpu_fields(all);
  for (const char* key : {"gpu.count", "gpu.name", "gpu.capability", "gpu.memory_bytes",
                          "gpu.driver", "gpu.cuda_runtime", "gpu.cudnn"})
    out[key] = all[key];
  return out;
}

std::vector<std::string> fingerprint_changes(const std::string& before, const std::string& now) {
  const auto parse = [](const std::string& text) {
    std::map<std::string, std::string> out;
    const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) return out;
    for (const auto& [key, value] : json.items())
      out[key] = value.is_string() ? value.get<std::string>() : value.dump();
    return out;
  };
  const auto a = parse(before), b = parse(now);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  const auto shown = [](const std::map<std::string, std::string>& m, const std::string& k) {
    const auto it = m.find(k);
    return it == m.end() ? std::string("(unset)") : it->second.empty() ? std::string("\"\"")
                                                                       : it->second;
  };
  std::vector<std::string> changes;
  for (const auto& k : keys) {
    const auto x = shown(a, k), y = shown(b, k);
    if (x != y) changes.push_back(k + ": " + x + " -> " + y);
  }
  return changes;
}

Fingerprint collect_fingerprint(std::int64_t seed, const std::vector<std::string>& run_env) {
  Fingerprint fp;
  auto& f = fp.fields;
  utsname uts{};
  if (uname(&uts) == 0) {
    f["host.hostname"] = uts.nodename;
    f["host.kernel"] = std::string(uts.sysname) + " " + uts.release;
    f["host.arch"] = uts.machine;
  }
  f["host.os"] = os_pretty_name();
  std::string model = proc_field("/proc/cpuinfo", "model name");
  f["cpu.model"] = model;
  f["cpu.logical_cores"] = std::to_string(std::thread::hardware_concurrency());
  f["cpu.physical_cores"] = physical_cores();
  f["cpu.isa"] = cpu_isa_flags();
  f["cpu.caches"] = cpu_caches();
  f["cpu.governor"] = read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  f["memory.total"] = proc_field("/proc/meminfo", "MemTotal");

  constexpr PluginAbiRecord abi = this_abi_record();
  add_build_fields(f);
  f["software.git_commit"] = kGitCommit;
  f["software.git_dirty"] = kGitDirty ? "true" : "false";
  f["software.compiler"] = abi.compiler;
  f["software.cxx11_abi"] = std::to_string(abi.cxx11_abi);
  f["software.torch_config"] = at::show_config();
  f["software.torch_parallel"] = at::get_parallel_info();
  f["threads.intra_op"] = std::to_string(at::get_num_threads());
  f["threads.inter_op"] = std::to_string(at::get_num_interop_threads());
  f["flags.deterministic_algorithms"] =
      at::globalContext().deterministicAlgorithms() ? "true" : "false";
  f["flags.float32_matmul_precision"] =
      std::string(at::globalContext().float32MatmulPrecision() ==
                          at::Float32MatmulPrecision::HIGHEST
                      ? "highest"
                      : at::globalContext().float32MatmulPrecision() ==
                                at::Float32MatmulPrecision::HIGH
                            ? "high"
                            : "medium");
  add_gpu_fields(f);
  for (const auto& [name, value] : current_environment())
    if (is_performance_env_var(name) ||
        std::find(run_env.begin(), run_env.end(), name) != run_env.end())
      f["env." + name] = value;
  // What the run process runs on, read back.
  const std::string allocator = malloc_library();
  f["runtime.malloc"] = allocator;
  f["runtime.cpus"] = format_cpu_list(allowed_cpus());
  const std::vector<int> numa = numa_binding();
  f["runtime.numa_binding"] = numa.empty() ? "none" : format_cpu_list(numa);
  // "unavailable" where the kernel reports no NUMA topology (numa_node is
  // refused there at validation).
  const std::size_t nodes = numa_nodes().size();
  f["runtime.numa_nodes"] = nodes == 0 ? std::string("unavailable") : std::to_string(nodes);
  f["seed"] = std::to_string(seed);
  return fp;
}

}  // namespace runner
