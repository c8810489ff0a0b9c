#include "runner/runtime/runtime.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace runner {
namespace {

// Kernel constants of <linux/mempolicy.h>, which glibc does not wrap.
constexpr int kMpolDefault = 0;
constexpr int kMpolBind = 2;
// Enough bits for any node number the kernel reports here.
constexpr unsigned long kMaxNodes = 1024;
constexpr int kMaxCpu = 1 << 16;

struct KnownAllocator {
  const char* name;
  const char* soname;
  const char* package;
};

constexpr std::array<KnownAllocator, 3> kAllocators{{
    {"system", "", ""},
    {"jemalloc", "libjemalloc.so.2", "libjemalloc2"},
    {"tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"},
}};

const KnownAllocator* known(const std::string& name) {
  for (const auto& a : kAllocators)
    if (name == a.name) return &a;
  return nullptr;
}

std::string read_first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return trim(line);
}

Error input_error(const std::string& message, const std::string& hint = {}) {
  return Error(message, hint, ErrorKind::input);
}

Error run_error(const std::string& message, const std::string& hint = {}) {
  return Error(message, hint, ErrorKind::run);
}

}  // namespace

const std::vector<std::string>& allocator_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& a : kAllocators) out.emplace_back(a.name);
    return out;
  }();
  return names;
}

std::string allocator_package(const std::string& name) {
  const KnownAllocator* a = known(name);
  return a == nullptr ? std::string() : a->package;
}

std::string allocator_soname(const std::string& name) {
  const KnownAllocator* a = known(name);
  return a == nullptr ? std::string() : a->soname;
}

std::optional<fs::path> find_allocator_library(const std::string& name) {
  // The folders Debian's dynamic linker searches, multiarch first.
  std::vector<fs::path> folders;
#if defined(__x86_64__)
  folders.emplace_back("/usr/lib/x86_64-linux-gnu");
  folders.emplace_back("/lib/x86_64-linux-gnu");
#elif defined(__aarch64__)
  folders.emplace_back("/usr/lib/aarch64-linux-gnu");
  folders.emplace_back("/lib/aarch64-linux-gnu");
#endif
  for (const char* f : {"/usr/local/lib", "/usr/lib64", "/usr/lib", "/lib64", "/lib"})
    folders.emplace_back(f);
  return find_allocator_library(name, folders);
}

std::optional<fs::path> find_allocator_library(const std::string& name,
                                               const std::vector<fs::path>& folders) {
  const std::string soname = allocator_soname(name);
  if (soname.empty()) return std::nullopt;
  for (const auto& folder : folders) {
    std::error_code ec;
    const fs::path candidate = folder / soname;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

bool allocator_preload_possible() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

std::pair<std::string, std::string> allocator_missing(const std::string& name) {
  const std::string package = allocator_package(name);
  return {"runtime.allocator = \"" + name + "\" needs " + allocator_soname(name) +
              ", which is not installed",
          "install the Debian package " + package + " (apt-get install " + package +
              "; 'scripts/dev setup' installs it)"};
}

std::vector<int> parse_cpu_list(std::string_view text) {
  const std::string shown(text);
  const std::string hint =
      "write CPUs as the kernel does: \"0-3\", \"0,2\" or \"0-3,8-11\" (see 'lscpu' or "
      "/sys/devices/system/cpu/online)";
  const auto number = [&](std::string_view part) {
    int value = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || value < 0 ||
        value >= kMaxCpu)
      throw input_error("'" + shown + "' is not a CPU list: '" + std::string(part) +
                            "' is not a CPU number",
                        hint);
    return value;
  };
  std::set<int> cpus;
  if (trim(text).empty()) throw input_error("the CPU list is empty", hint);
  for (const std::string& raw : split(std::string(text), ',')) {
    const std::string part = trim(raw);
    const auto dash = part.find('-');
    if (dash == std::string::npos) {
      cpus.insert(number(part));
      continue;
    }
    const int first = number(std::string_view(part).substr(0, dash));
    const int last = number(std::string_view(part).substr(dash + 1));
    if (last < first)
      throw input_error("'" + shown + "' is not a CPU list: the range '" + part + "' runs backwards",
                        hint);
    for (int c = first; c <= last; ++c) cpus.insert(c);
  }
  return {cpus.begin(), cpus.end()};
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::vector<int> sorted(cpus);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    parts.push_back(i == j ? std::to_string(sorted[i])
                           : std::to_string(sorted[i]) + "-" + std::to_string(sorted[j]));
    i = j + 1;
  }
  return join(parts, ",");
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::map<int, std::vector<int>> numa_nodes() {
  std::map<int, std::vector<int>> nodes;
  const fs::path root("/sys/devices/system/node");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4) continue;
    int node = -1;
    const auto [end, parse] = std::from_chars(name.data() + 4, name.data() + name.size(), node);
    if (parse != std::errc() || end != name.data() + name.size()) continue;
    const std::string list = read_first_line(entry.path() / "cpulist");
    std::vector<int> cpus;
    try {
      if (!list.empty()) cpus = parse_cpu_list(list);
    } catch (const Error&) {
      cpus.clear();
    }
    nodes[node] = std::move(cpus);
  }
  return nodes;
}

void apply_cpu_affinity(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= CPU_SETSIZE)
      throw run_error("cannot bind to CPU " + std::to_string(c) + ": more than " +
                      std::to_string(CPU_SETSIZE) + " CPUs are not supported");
    CPU_SET(c, &set);
  }
  if (::sched_setaffinity(0, sizeof set, &set) != 0)
    throw run_error("cannot bind the run process to CPUs " + format_cpu_list(cpus) + ": " +
                        std::strerror(errno),
                    "check the CPUs this process may use (taskset -p $$, or its cgroup's cpuset)");
}

void apply_numa_binding(int node) {
  if (node < 0 || static_cast<unsigned long>(node) >= kMaxNodes)
    throw run_error("NUMA node " + std::to_string(node) + " is out of range");
  std::array<unsigned long, kMaxNodes / (8 * sizeof(unsigned long))> mask{};
  const auto bits = 8 * sizeof(unsigned long);
  mask[static_cast<std::size_t>(node) / bits] |= 1UL << (static_cast<std::size_t>(node) % bits);
  if (::syscall(SYS_set_mempolicy, kMpolBind, mask.data(), kMaxNodes + 1) != 0)
    throw run_error("cannot bind the run process's memory to NUMA node " + std::to_string(node) +
                        ": " + std::strerror(errno),
                    "set_mempolicy(2) may be refused in a container without CAP_SYS_NICE");
}

std::vector<int> numa_binding() {
  std::array<unsigned long, kMaxNodes / (8 * sizeof(unsigned long))> mask{};
  int mode = kMpolDefault;
  std::vector<int> nodes;
  if (::syscall(SYS_get_mempolicy, &mode, mask.data(), kMaxNodes, nullptr, 0UL) != 0 ||
      mode != kMpolBind)
    return nodes;
  const auto bits = 8 * sizeof(unsigned long);
  for (std::size_t n = 0; n < kMaxNodes; ++n)
    if ((mask[n / bits] >> (n % bits)) & 1UL) nodes.push_back(static_cast<int>(n));
  return nodes;
}

std::string malloc_library() {
  Dl_info info{};
  void* symbol = ::dlsym(RTLD_DEFAULT, "malloc");
  if (symbol == nullptr || ::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  const fs::path resolved = fs::canonical(info.dli_fname, ec);
  return ec ? std::string(info.dli_fname) : resolved.string();
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) out.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return out;
}

bool is_environment_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::vector<std::string> fresh_process_reasons(const std::map<std::string, std::string>& env,
                                               const std::string& allocator) {
  std::vector<std::string> reasons;
  for (const auto& [name, value] : env) {
    const char* now = std::getenv(name.c_str());
    if (now == nullptr || value != now) reasons.push_back("[env] " + name);
  }
  if (allocator != "system") reasons.push_back("allocator " + allocator);
  return reasons;
}

std::vector<std::string> fresh_process_environment(const std::map<std::string, std::string>& env,
                                                   const std::string& allocator) {
  std::map<std::string, std::string> all = current_environment();
  for (const auto& [name, value] : env) all[name] = value;
  if (allocator != "system") {
    const auto library = find_allocator_library(allocator);
    if (!library) {
      const auto [message, hint] = allocator_missing(allocator);
      throw input_error(message, hint);
    }
    const auto it = all.find("LD_PRELOAD");
    all["LD_PRELOAD"] = library->string() +
                        (it == all.end() || it->second.empty() ? "" : " " + it->second);
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : all) out.push_back(name + "=" + value);
  return out;
}

std::vector<int> bound_cpus(const RuntimeRequest& request) {
  if (!request.cpus.empty()) return request.cpus;
  if (request.numa_node < 0) return {};
  const auto nodes = numa_nodes();
  const auto it = nodes.find(request.numa_node);
  return it == nodes.end() ? std::vector<int>{} : it->second;
}

void apply_runtime(const RuntimeRequest& request) {
  const std::vector<int> cpus = bound_cpus(request);
  if (!cpus.empty()) apply_cpu_affinity(cpus);
  if (request.numa_node >= 0) apply_numa_binding(request.numa_node);
}

void verify_runtime(const RuntimeRequest& request) {
  for (const auto& [name, value] : request.env) {
    const char* now = std::getenv(name.c_str());
    if (now == nullptr || value != now)
      throw run_error("[env] " + name + " is " +
                      (now == nullptr ? std::string("unset") : "\"" + std::string(now) + "\"") +
                      " in the run process, not \"" + value + "\"");
  }
  if (request.allocator != "system") {
    const std::string soname = allocator_soname(request.allocator);
    const std::string library = malloc_library();
    const auto expected = find_allocator_library(request.allocator);
    std::error_code ec;
    const bool same = expected && !library.empty() &&
                      fs::equivalent(fs::path(library), *expected, ec);
    if (!same)
      throw run_error("allocator \"" + request.allocator + "\" did not take effect: malloc "
                      "resolves to " + (library.empty() ? std::string("nothing") : library) +
                      ", not " + (expected ? expected->string() : soname),
                      "another LD_PRELOAD library may define malloc first");
  }
  const std::vector<int> cpus = bound_cpus(request);
  if (!cpus.empty()) {
    const std::vector<int> now = allowed_cpus();
    if (now != cpus)
      throw run_error("the run process runs on CPUs " + format_cpu_list(now) + ", not " +
                      format_cpu_list(cpus) + " as [runtime] asks");
  }
  if (request.numa_node >= 0) {
    const std::vector<int> bound = numa_binding();
    if (bound != std::vector<int>{request.numa_node})
      throw run_error("the run process's memory is " +
                      (bound.empty() ? std::string("not bound to a NUMA node")
                                     : "bound to NUMA nodes " + format_cpu_list(bound)) +
                      ", not to node " + std::to_string(request.numa_node));
  }
}

}  // namespace runner
