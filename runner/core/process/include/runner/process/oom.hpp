// Whether the kernel's OOM killer ended a child: a run process killed by
// SIGKILL is said to be out of memory only when the kernel's own count of
// OOM kills in its memory cgroup rose while it ran. No LibTorch here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace runner {

/// The file holding the `oom_kill N` count of the memory cgroup that
/// `cgroup` (the text of /proc/self/cgroup) names, under the mounts that
/// `mountinfo` (the text of /proc/self/mountinfo) lists: cgroup v1's
/// `memory.oom_control` when the memory controller is on v1, else cgroup v2's
/// `memory.events`. Empty when no mounted memory hierarchy holds the cgroup.
[[nodiscard]] std::filesystem::path oom_kill_counter_file(std::string_view cgroup,
                                                          std::string_view mountinfo);

/// The same for this process, from /proc/self; empty when unknown.
[[nodiscard]] std::filesystem::path oom_kill_counter_file();

/// The `oom_kill` count in `file`; nullopt when it cannot be read or has none.
[[nodiscard]] std::optional<std::int64_t> read_oom_kills(const std::filesystem::path& file);

/// The OOM-kill count taken before a child starts (children share the cgroup).
struct OomKillBaseline {
  std::filesystem::path file;         ///< empty when this machine has no count
  std::optional<std::int64_t> count;  ///< nullopt when it could not be read
  /// Reads `file` now.
  [[nodiscard]] static OomKillBaseline take(std::filesystem::path file);
  /// Reads this process's cgroup's count now.
  [[nodiscard]] static OomKillBaseline take();
};

/// Why a child that `who` names ("rank 0 of 2 (host h, pid 7)"; empty: the
/// run process) ended by `signal`: "killed by signal 11 (Segmentation
/// fault)", and for SIGKILL whether the OOM killer did it, from `before` and
/// the count read now: out of memory only when the count rose; otherwise
/// killed from outside runner, or "either" when there is no count to read.
[[nodiscard]] std::string describe_kill(const std::string& who, int signal,
                                        const OomKillBaseline& before);

}  // namespace runner
