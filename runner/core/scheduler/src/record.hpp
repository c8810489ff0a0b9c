// Recording what a run did (private to the scheduler).
#pragma once

#include <cstdint>

#include "runner/engine/engine.hpp"
#include "runner/process/isolation.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// Writes a run's samples and its verdict (the run process does this itself).
void record_outcome(store::Store& db, std::int64_t run_id, const RunOutcome& outcome);

/// Final status of a run from its process's exit, when the process did not
/// record one itself (crash, timeout, second interrupt, early exit).
void record_child_exit(store::Store& db, std::int64_t run_id, const ChildExit& exit,
                       double timeout_s);

}  // namespace runner
