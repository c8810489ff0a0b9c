// The status of a run as the store records it (runs.status). Text appears
// only at the SQL boundary and in what the CLI prints.
#pragma once

#include <array>
#include <iosfwd>
#include <string_view>

namespace runner::store {

/// Where a run stands: running until one final status is written.
enum class RunStatus {
  running,      ///< started, no verdict yet
  finished,     ///< completed every step; its numbers are valid
  failed,       ///< stopped by an error (a plugin threw, out of memory, ...)
  crashed,      ///< its process died from a signal
  timeout,      ///< exceeded its time limit and was killed
  interrupted,  ///< stopped by the user, or its runner vanished (stale heartbeat)
  diverged,     ///< the loss became NaN or infinite
};

/// Every status, in declaration order (for messages that list them).
inline constexpr std::array<RunStatus, 7> kRunStatuses = {
    RunStatus::running, RunStatus::finished,    RunStatus::failed,  RunStatus::crashed,
    RunStatus::timeout, RunStatus::interrupted, RunStatus::diverged};

/// The spelling in runs.status and in the views: "running", "finished", ...
[[nodiscard]] constexpr const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::running: return "running";
    case RunStatus::finished: return "finished";
    case RunStatus::failed: return "failed";
    case RunStatus::crashed: return "crashed";
    case RunStatus::timeout: return "timeout";
    case RunStatus::interrupted: return "interrupted";
    case RunStatus::diverged: return "diverged";
  }
  return "?";
}

/// The status spelled `text`; throws runner::Error ("unknown run status 'x'
/// (expected running, finished, ...)") if it is none.
[[nodiscard]] RunStatus parse_run_status(std::string_view text);

/// Prints to_string(status).
std::ostream& operator<<(std::ostream& out, RunStatus status);

}  // namespace runner::store
