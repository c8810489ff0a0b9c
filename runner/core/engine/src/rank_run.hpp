// One rank's run (rank_run.cpp): the only rank of a run outside
// [distributed], or rank 0 of a data-parallel one, which records it.
#pragma once

#include "runner/engine/engine.hpp"
#include "workload.hpp"

namespace runner {

/// One rank's run (the only rank outside [distributed]): build, loop,
/// summarise. `own_failure` is set when the run failed by its own fault (an
/// error of runner, a plugin or the data), not by a collective.
RunOutcome run_rank(const RunRequest& request, const RankInfo& rank, bool* own_failure = nullptr);

}  // namespace runner
