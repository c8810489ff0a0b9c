// The environment fingerprint: everything about the machine and software
// that can change a performance number. Flat "area.key" -> value strings;
// stored once per distinct content and referenced by runs. Volatile facts
// (load, time) are kept out so that identical environments share one row.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace runner {

struct Fingerprint {
  std::map<std::string, std::string> fields;

  /// Canonical JSON (sorted keys).
  [[nodiscard]] std::string json() const;
  /// SHA-256 of json().
  [[nodiscard]] std::string hash() const;
};

/// Collects the fingerprint of this process. Call after configure_runtime()
/// so thread counts are the ones runs will use.
[[nodiscard]] Fingerprint collect_fingerprint(std::int64_t seed);

/// True for environment variable names that can change performance
/// (OMP_*, MKL_*, KMP_*, CUDA_*, CUBLAS_*, NCCL_*, TORCH_*, PYTORCH_*, ...).
[[nodiscard]] bool is_performance_env_var(const std::string& name);

/// 1-minute load average, or -1 if unknown.
[[nodiscard]] double load_average_1m();

}  // namespace runner
