// A data-parallel ([distributed]) run (distributed.cpp).
#pragma once

#include "runner/engine/engine.hpp"

namespace runner {

/// A [distributed] run. Rank 0 is this process, which measures and reports.
/// Without a launcher, ranks 1..N-1 are forked from it before it runs any
/// operator (so no thread exists yet) and meet it through a FileStore; in a
/// launched job they are processes of the job (execute_rank), met through
/// the job's TCPStore.
RunOutcome run_distributed(const RunRequest& request);

}  // namespace runner
