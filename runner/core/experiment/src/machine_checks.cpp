// What a trial asks of this machine, checked before any run and reported
// at its key: [runtime]'s allocator, CPUs and NUMA node, and a
// [distributed] backend that cannot reduce the device's tensors.
#include <algorithm>
#include <string>
#include <vector>

#include "parsed_experiment.hpp"
#include "runner/runtime/runtime.hpp"

namespace runner {

using experiment::detail::Leaf;
using experiment::detail::Section;

// What [runtime] asks of this machine: the allocator's library installed, the
// CPUs and the NUMA node present. Each problem is reported at its key.
void ParsedExperiment::check_runtime(Experiment& e) const {
  const auto fail_at = [&](const std::string& dotted, const std::string& message,
                           const std::string& hint) {
    const auto it = e.key_where.find(dotted);
    throw Error(it != e.key_where.end() ? it->second : check_.nowhere(), message, hint);
  };
  for (const char* key : {"threads", "interop_threads"})
    if (e.key_where.count(std::string("runtime.") + key) != 0 &&
        e.key_where.count(std::string("device.") + key) != 0)
      fail_at(std::string("runtime.") + key,
              std::string("'runtime.") + key + "' and 'device." + key +
                  "' are the same setting; set it once",
              std::string("remove one of them (runtime.") + key + " is the documented place)");
  RuntimeSettings& r = e.runtime;
  if (r.allocator != "system" && !allocator_preload_possible())
    fail_at("runtime.allocator",
            "runtime.allocator = \"" + r.allocator +
                "\" cannot be preloaded into this runner: it is built with AddressSanitizer, "
                "which replaces malloc itself",
            "use a build without sanitizers (scripts/dev build) to compare allocators");
  if (r.allocator != "system" && !find_allocator_library(r.allocator)) {
    const auto [message, hint] = allocator_missing(r.allocator);
    fail_at("runtime.allocator", message, hint);
  }
  // Checked for every trial of a sweep: the system is asked only when the
  // trial binds to something.
  std::vector<int> cpus;
  if (!r.cpu_affinity.empty()) {
    const std::vector<int> allowed = allowed_cpus();
    try {
      cpus = parse_cpu_list(r.cpu_affinity);
    } catch (const Error& error) {
      fail_at("runtime.cpu_affinity", "'runtime.cpu_affinity': " + std::string(error.what()),
              error.hint());
    }
    for (int cpu : cpus)
      if (std::find(allowed.begin(), allowed.end(), cpu) == allowed.end())
        fail_at("runtime.cpu_affinity",
                "'runtime.cpu_affinity' names CPU " + std::to_string(cpu) +
                    ", which this machine does not have (runner may use CPUs " +
                    format_cpu_list(allowed) + ")",
                "name CPUs from " + format_cpu_list(allowed));
    r.cpu_affinity = format_cpu_list(cpus);
  }
  if (r.numa_node >= 0) {
    const auto nodes = numa_nodes();
    std::vector<int> names;
    for (const auto& [node, node_cpus] : nodes) names.push_back(node);
    const auto it = nodes.find(static_cast<int>(r.numa_node));
    if (it == nodes.end())
      fail_at("runtime.numa_node",
              "'runtime.numa_node' is " + std::to_string(r.numa_node) + ", but " +
                  (nodes.empty() ? std::string("the kernel reports no NUMA nodes on this machine")
                                 : "this machine has NUMA node(s) " + format_cpu_list(names)),
              nodes.empty() ? "remove numa_node" : "use one of " + format_cpu_list(names));
    for (int cpu : cpus)
      if (std::find(it->second.begin(), it->second.end(), cpu) == it->second.end())
        fail_at("runtime.cpu_affinity",
                "'runtime.cpu_affinity' names CPU " + std::to_string(cpu) +
                    ", which is not on NUMA node " + std::to_string(r.numa_node) + " (CPUs " +
                    format_cpu_list(it->second) + ")",
                "name CPUs of the node, or leave cpu_affinity out to use all of them");
  }
}

void ParsedExperiment::check_backend(const HostConfig& config) const {
  // nccl reduces CUDA tensors only; gloo reduces both (CUDA ones through host
  // copies); "auto" is decided at run time.
  const std::string& backend = config.experiment.distributed.backend;
  const std::string& device = config.experiment.device.type;
  if (backend != "nccl" || device != "cpu") return;
  const Section& section = *config.distributed;
  const std::string message = "[distributed] backend \"nccl\" does not work with device.type = \"cpu\"";
  const std::string hint =
      "use backend = \"gloo\" for device.type = \"cpu\" (gloo: CPU and CUDA tensors, nccl: CUDA tensors)";
  for (const Leaf& item : section.items)
    if (item.key == "backend") throw check_.error(item, message, hint);
  throw check_.error(section.key_src, *section.node, message, hint);
}

}  // namespace runner
