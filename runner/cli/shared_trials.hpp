// What a plan says about trials whose runs are another experiment's: two
// files that differ only in [experiment] name are one configuration, and a
// configuration's runs are shared (trial identity is the configuration's
// hash), so the later file runs none of its own.
#pragma once

#include <string>
#include <vector>

#include "runner/scheduler/scheduler.hpp"

namespace runner::cli {

/// One line per trial of `sweep` whose runs are another experiment's, in file
/// order: "b's trial:4 is a's trial:1: 3 runs shared" for a trial that an
/// earlier file of the schedule runs (as `actions` plan it), "b's trial:4 is
/// a's trial:1: 3 recorded runs shared" for one whose runs the store
/// `options.db` (when it exists) holds under an experiment of another name.
/// None of the latter with --force, which runs every trial's own repetitions.
[[nodiscard]] std::vector<std::string> sharing_lines(const Sweep& sweep,
                                                     const std::vector<PlannedAction>& actions,
                                                     const SchedulerOptions& options);

}  // namespace runner::cli
