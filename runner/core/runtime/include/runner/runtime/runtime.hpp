// The process environment a run asks for ([env] and [runtime]): which
// allocator library to preload, which CPUs and NUMA node to bind to, and the
// environment variables to set; how to apply each in the run process and how
// to read each back, so that a run proves its settings took effect.
// Linux system calls only. No LibTorch here.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runner {

/// The allocators [runtime] allocator accepts, "system" first.
[[nodiscard]] const std::vector<std::string>& allocator_names();

/// The Debian package that installs an allocator's library ("libjemalloc2").
[[nodiscard]] std::string allocator_package(const std::string& name);

/// The shared library an allocator is preloaded from ("libjemalloc.so.2"),
/// empty for "system".
[[nodiscard]] std::string allocator_soname(const std::string& name);

/// Where the allocator's library is installed: the first of the system's
/// library folders that holds its soname; nullopt when none does (and for
/// "system", which preloads nothing).
[[nodiscard]] std::optional<std::filesystem::path> find_allocator_library(const std::string& name);
/// The same, searching `folders` only.
[[nodiscard]] std::optional<std::filesystem::path> find_allocator_library(
    const std::string& name, const std::vector<std::filesystem::path>& folders);

/// True when this build can preload another allocator: not one built with
/// AddressSanitizer, whose runtime must come first in the library list and
/// replaces malloc itself.
[[nodiscard]] bool allocator_preload_possible();

/// "runtime.allocator = \"jemalloc\" needs libjemalloc.so.2, which is not
/// installed" and its hint (the package and how to install it).
[[nodiscard]] std::pair<std::string, std::string> allocator_missing(const std::string& name);

/// A CPU list as the kernel writes them ("0-3,8,10-11"): sorted, unique CPU
/// numbers. Throws runner::Error (input) naming what is wrong with `text`.
[[nodiscard]] std::vector<int> parse_cpu_list(std::string_view text);

/// The shortest CPU list text for `cpus` ("0-3,8").
[[nodiscard]] std::string format_cpu_list(const std::vector<int>& cpus);

/// CPUs this process may run on (its affinity mask, sched_getaffinity).
[[nodiscard]] std::vector<int> allowed_cpus();

/// The machine's NUMA nodes and their CPUs (/sys/devices/system/node); empty
/// when the kernel reports none.
[[nodiscard]] std::map<int, std::vector<int>> numa_nodes();

/// Binds this process (and the threads it starts later) to `cpus`. Throws
/// runner::Error (run kind) with the system's reason when refused.
void apply_cpu_affinity(const std::vector<int>& cpus);

/// Binds this process's future memory allocations to NUMA node `node`
/// (set_mempolicy MPOL_BIND). Throws runner::Error (run kind) when refused.
void apply_numa_binding(int node);

/// The nodes this process's memory policy binds it to; empty when it is not
/// bound (the default policy).
[[nodiscard]] std::vector<int> numa_binding();

/// The file `malloc` resolves to in this process (the preloaded allocator
/// when one is), from the dynamic linker.
[[nodiscard]] std::string malloc_library();

/// The environment of this process as name -> value.
[[nodiscard]] std::map<std::string, std::string> current_environment();

/// True when `name` can be an environment variable in [env]: letters, digits
/// and underscores, not starting with a digit.
[[nodiscard]] bool is_environment_name(std::string_view name);

/// What the run process needs that a fork of the runner cannot give it: the
/// variables of `env` whose value differs from this process's, and an
/// allocator to preload. Empty: a fork will do.
[[nodiscard]] std::vector<std::string> fresh_process_reasons(
    const std::map<std::string, std::string>& env, const std::string& allocator);

/// The environment a fresh run process starts with: this process's, with
/// `env` set over it and the allocator's library put first in LD_PRELOAD.
/// Throws runner::Error (input) when the allocator is not installed.
[[nodiscard]] std::vector<std::string> fresh_process_environment(
    const std::map<std::string, std::string>& env, const std::string& allocator);

/// The settings a run asked for, to check in its own process.
struct RuntimeRequest {
  std::map<std::string, std::string> env;  ///< [env]
  std::string allocator = "system";        ///< [runtime] allocator
  std::vector<int> cpus;                   ///< [runtime] cpu_affinity; empty: unset
  int numa_node = -1;                      ///< [runtime] numa_node; -1: unset
};

/// Applies the affinity and NUMA binding of `request` to this process (call
/// before any thread is started). Throws runner::Error (run kind) when refused.
void apply_runtime(const RuntimeRequest& request);

/// Reads back every setting of `request` in this process and throws
/// runner::Error (run kind) naming the first that did not take effect
/// ("[env] OMP_NUM_THREADS is \"2\" in the run process, not \"1\"").
void verify_runtime(const RuntimeRequest& request);

/// The CPUs a request binds to: its cpu_affinity, else its NUMA node's CPUs;
/// empty when it binds to none.
[[nodiscard]] std::vector<int> bound_cpus(const RuntimeRequest& request);

}  // namespace runner
