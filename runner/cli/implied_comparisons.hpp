// The comparisons an experiment file implies (the `runner compare
// experiment:NAME --by KEY ...` commands its comments print) and whether the
// planned repetitions can decide each: what `runner run --dry-run` and the
// plan line of `runner run` say before anything runs (docs/method.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runner/scheduler/scheduler.hpp"

namespace runner::cli {

/// One `runner compare experiment:NAME --by KEY ...` command of a file's comments.
struct ImpliedComparison {
  int line = 0;                    ///< 1-based line of the file where the command starts
  std::string command;             ///< as written, continuation lines joined
  std::string experiment;          ///< NAME of experiment:NAME
  std::string by;                  ///< --by KEY
  std::string baseline;            ///< --baseline VALUE, "" without
  std::string versus;              ///< --versus VALUE, "" without
  std::vector<std::string> where;  ///< every --where KEY=VALUE, in order
  bool pairs = false;              ///< --pairs: one comparison per pair of like trials
};

/// The `runner compare experiment:NAME --by KEY` commands in the comments of
/// `text` (an experiment file), a trailing backslash continuing a command on
/// the next comment line. Commands without --by (trial:N trial:M) imply no
/// split of one experiment and are left out.
[[nodiscard]] std::vector<ImpliedComparison> implied_comparisons(const std::string& text);

/// Whether the planned runs of `prepared` can decide `comparison`: the runs
/// each side would pool and the smallest p the rank test can reach with
/// them (with --pairs, of the pair with the fewest), or why compare would
/// refuse it (its own message: a key no trial varies, a side that would pool
/// trials differing in another key). One line, without the file and line.
[[nodiscard]] std::string decidability(const ImpliedComparison& comparison,
                                       const PreparedExperiment& prepared);

/// The lines `runner run --dry-run` and the plan line print about what the
/// planned repetitions can decide: one for a sweep's trials taken two at a
/// time, then one per comparison the file's comments imply
/// ("FILE:LINE: COMMAND" and its decidability()). Empty for a single trial
/// without implied comparisons.
[[nodiscard]] std::vector<std::string> decidability_lines(const Sweep& sweep);

}  // namespace runner::cli
