// The engine's entry: one repetition of an experiment handed to the kernel
// run, the data-parallel run or the single rank's run. The parts of a run
// live in files of their own: workload.cpp (building it), loops.cpp (the
// train and infer steps), metrics.cpp (derived figures), device.cpp,
// rank_run.cpp, distributed.cpp, preflight.cpp (checks before any run).
#include "runner/engine/engine.hpp"

#include "distributed.hpp"
#include "kernel_run.hpp"
#include "rank_run.hpp"

namespace runner {

std::uint64_t run_seed(const Experiment& experiment, std::int64_t) {
  return static_cast<std::uint64_t>(experiment.seed);
}

RunOutcome execute_run(const RunRequest& request) {
  const Experiment& exp = *request.experiment;
  if (exp.kind == RunKind::kernel) return run_kernel(request);
  if (exp.kind == RunKind::train && exp.distributed.enabled) return run_distributed(request);
  return run_rank(request, RankInfo{});
}

}  // namespace runner
