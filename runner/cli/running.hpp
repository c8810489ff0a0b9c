// What `runner run`, `rerun` and `validate` share (private to runner/cli;
// defined in cmd_run.cpp): the run flags, preparing an experiment file with
// its warnings logged, and running a schedule with the progress lines and
// the end-of-sweep table printed.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/scheduler/scheduler.hpp"

namespace runner::cli {

/// Flags of `run` beyond the common ones (`rerun` takes some of them).
struct RunFlags {
  std::vector<std::string> set;  ///< --set KEY=VALUE overrides
  bool dry_run = false;          ///< --dry-run
  SchedulerOptions options;      ///< resume policy, isolation, shard, failure limits
};

/// The flags `args` gives; throws runner::Error (input) for a bad value or combination.
[[nodiscard]] RunFlags run_flags(const Args& args, const Global& global);

/// The experiment `file` with the overrides `set`, every trial checked;
/// its warnings are logged.
[[nodiscard]] PreparedExperiment prepare(const std::filesystem::path& file, const Global& global,
                                         const std::vector<std::string>& set);

/// Runs `sweep`, printing a progress line per run and the table at the end;
/// returns the exit code (0 all finished, 1 a run failed, 130 interrupted).
[[nodiscard]] int run_printing(const Sweep& sweep, const SchedulerOptions& options,
                               const Global& global);

}  // namespace runner::cli
