// Liveness of the processes behind "running" rows (private to the scheduler).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runner/store/store.hpp"

namespace runner {

/// What identifies this process for liveness checks recorded with its runs.
struct ProcessIdentity {
  std::int64_t pid = 0;
  std::string host;
  std::string boot_id;
  std::int64_t start = 0;  ///< clock ticks after boot
};

/// This process's identity.
[[nodiscard]] ProcessIdentity this_process();

/// Whether a running row's process still exists.
enum class Liveness {
  alive,
  gone,     ///< no such process, a zombie, another process with its pid, or another boot
  unknown,  ///< another host's run, or no pid recorded: assumed alive
};

/// Decides for one running row, by pid, host, boot and start time.
[[nodiscard]] Liveness liveness_of(const store::RunningRun& run);

}  // namespace runner
