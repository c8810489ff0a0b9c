// The environment fingerprint: everything about the machine and software
// that can change a performance number. Flat "area.key" -> value strings;
// stored once per distinct content and referenced by runs. Volatile facts
// (load, time) are kept out so that identical environments share one row.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace runner {

struct Fingerprint {
  std::map<std::string, std::string> fields;

  /// Canonical JSON (sorted keys).
  [[nodiscard]] std::string json() const;
  /// SHA-256 of json().
  [[nodiscard]] std::string hash() const;
};

/// Collects the fingerprint of this process. Call after configure_runtime()
/// so thread counts are the ones runs will use. `run_env` names the
/// variables the run's [env] set: they are recorded ("env.NAME") whether or
/// not they are known to matter for performance.
[[nodiscard]] Fingerprint collect_fingerprint(std::int64_t seed,
                                              const std::vector<std::string>& run_env = {});

/// The part of the fingerprint that joins a trial's identity, computed in the
/// runner before any run (no CUDA, no thread pool): library versions and the
/// build, the CPU (model, count, ISA), the CPUs runs may use (`cpus`, as a
/// list), and the performance-relevant environment variables of the run
/// process (this process's environment with `run_env` set over it, plus
/// every variable `run_env` sets). GPU fields are added by the caller for
/// CUDA trials (gpu_identity_fields, in a child process).
[[nodiscard]] Fingerprint identity_fingerprint(const std::map<std::string, std::string>& run_env,
                                               const std::string& cpus);

/// GPU model, count, capability and driver: the GPU part of a CUDA trial's
/// identity. Initialises CUDA: call it in a child process.
[[nodiscard]] std::map<std::string, std::string> gpu_identity_fields();

/// The fields of `now` that differ from `before` (both fingerprint JSON
/// objects of flat strings), as "name: old -> new" ("(unset)" for a missing
/// field), sorted by name.
[[nodiscard]] std::vector<std::string> fingerprint_changes(const std::string& before,
                                                           const std::string& now);

/// True for environment variable names that can change performance
/// (OMP_*, MKL_*, KMP_*, CUDA_*, CUBLAS_*, NCCL_*, TORCH_*, PYTORCH_*, ...).
[[nodiscard]] bool is_performance_env_var(const std::string& name);

/// Size in bytes of the largest (last-level) data or unified cache of CPU 0,
/// from sysfs; 0 when unknown.
[[nodiscard]] std::int64_t last_level_cache_bytes();

/// 1-minute load average, or -1 if unknown.
[[nodiscard]] double load_average_1m();

}  // namespace runner
