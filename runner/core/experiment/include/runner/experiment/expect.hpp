// [[expect]]: a claim inside an experiment file, stated as the ratio B / A
// of one metric between two values of a swept key (docs/experiment.md,
// "[[expect]]"). Parsed and validated with the rest of the file
// (runner/core/experiment/src/expect.cpp); judged against a store by
// runner/core/scheduler (judge.hpp) through the statistics module.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/run_kind.hpp"

namespace runner {

/// Which of the three bounds an expectation states.
enum class ExpectBound {
  ratio_below,        ///< B / A < value
  ratio_above,        ///< B / A > value
  equivalent_within,  ///< 1 - value <= B / A <= 1 + value
};

/// "ratio_below", "ratio_above" or "equivalent_within": the key that writes it.
[[nodiscard]] const char* bound_key(ExpectBound bound);

/// One [[expect]] table, validated against the experiment's sweep.
struct Expectation {
  std::string claim;        ///< what is claimed, in words (required)
  std::string source;       ///< where the claim comes from; free text, may be empty
  std::string metric;       ///< a phase, a summary or a recorded metric of the experiment's kind
  std::string by;           ///< the swept key whose two values are the sides
  std::string baseline;     ///< side A's value of `by`, as TOML writes it ("\"loop\"", "2")
  std::string versus;       ///< side B's value, likewise
  /// Only trials with these values: dotted key -> value as TOML writes it.
  std::vector<std::pair<std::string, std::string>> where;
  ExpectBound bound = ExpectBound::ratio_below;  ///< which bound
  double value = 0;         ///< the bound's number (> 0)
  SourceLocation at;        ///< where the [[expect]] table is written
  std::size_t number = 0;   ///< 1-based among the experiment's [[expect]] tables
  /// The trials (0-based expansion positions, Trial::index) of each side:
  /// `by` at `baseline` (A) or `versus` (B) and every `where` matched.
  std::vector<std::int64_t> trials_a, trials_b;
};

/// The metrics an expectation may name in an experiment of `kind`: its
/// headline summary, the phases it records, and its recorded metrics.
[[nodiscard]] const std::vector<std::string>& expectation_metrics(RunKind kind);

/// Whether a trial's value of a key (as TOML writes it) is the value an
/// expectation or `compare --baseline` names: equal text, or equal once a
/// string's quotes are dropped ("2" names 2, as compare's --by reads it).
[[nodiscard]] bool same_value(const std::string& trial_value, const std::string& named);

/// A value as messages show it: a string without its quotes.
[[nodiscard]] std::string bare_value(const std::string& toml_text);

}  // namespace runner
