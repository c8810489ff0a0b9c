// Recording what a run did (private to the scheduler).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runner/engine/engine.hpp"
#include "runner/engine/rendezvous.hpp"
#include "runner/process/isolation.hpp"
#include "runner/process/oom.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// Writes a run's samples and its verdict (the run process does this itself).
void record_outcome(store::Store& db, std::int64_t run_id, const RunOutcome& outcome);

/// Final status of a run from its process's exit, when the process did not
/// record one itself (crash, timeout, second interrupt, early exit). `reason`
/// is what the run process said before it exited, if anything; `job` the
/// launched job's rendezvous of a [distributed] run, if any; `oom` the
/// kernel's count of OOM kills taken before the process started.
void record_child_exit(store::Store& db, std::int64_t run_id, const ChildExit& exit,
                       const Experiment& experiment, const std::optional<Rendezvous>& job,
                       const std::string& reason, const OomKillBaseline& oom);

/// How a run's error names its process: "" for a run of one process, and
/// "rank 0 of 2 (host h, pid 7)" for the rank a [distributed] run process is.
[[nodiscard]] std::string run_process_name(const Experiment& experiment,
                                           const std::optional<Rendezvous>& job, int pid);

/// Longest error text a failed run records: enough for any real message,
/// bounded so that a runaway one (a thousand ranks' failures) cannot bloat the store.
inline constexpr std::size_t kMaxErrorBytes = 2000;

/// `text` cut to at most kMaxErrorBytes, the " [...]" that marks the cut
/// included, at a character boundary (so cutting twice changes nothing).
[[nodiscard]] std::string bounded_error(std::string text);

/// The first non-empty line of an exception's message (LibTorch appends a
/// backtrace after it), at most kMaxErrorBytes long.
[[nodiscard]] std::string failure_reason(const std::string& what);

/// "progress STEP TOTAL LOSS STEPS_PER_S DATA_SHARE\n": how a fresh run
/// process reports progress to the scheduler (NaN written as "nan").
[[nodiscard]] std::string progress_line(const Progress& p);
/// The progress a line of progress_line() holds; nullopt for any other line.
[[nodiscard]] std::optional<Progress> parse_progress_line(const std::string& line);

}  // namespace runner
