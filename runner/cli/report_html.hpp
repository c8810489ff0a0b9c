// The page of `runner report`: one self-contained HTML file (the chart
// library inlined, no network access when opened) drawn from what the store
// holds about a set of runs. docs/report.md describes every section.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comparison.hpp"
#include "runner/experiment/expect.hpp"
#include "selection.hpp"

namespace runner::cli {

/// A finished run with the same configuration as a selected trial, recorded
/// at any time (the history view: a model tracked across builds of its plugin).
struct HistoryPoint {
  std::string config_hash;   ///< what the points of one chart share
  std::string title;         ///< the configuration's trial label or experiment
  std::int64_t run_id = 0;
  std::string started_at;    ///< ISO-8601 UTC
  double headline_ns = 0;    ///< the run's p50 of its headline metric
  std::string headline;      ///< step_time, latency or call_time
  std::string build;         ///< the plugin libraries it ran: "mlp 0.1.0 (1a2b3c4d)" ...
  std::string commit;        ///< runner's commit from the fingerprint (short)
  std::string axis_label;    ///< the run's `commit` label, the axis when runs carry it ("" when none)
};

/// A configuration key whose values differ between the two compared sides
/// (several values of a side joined by ", ").
struct ConfigDifference {
  std::string key;  ///< dotted, as --set and --by take it: "train.steps"
  std::string a, b;
};

/// One [[expect]] of a reported experiment, judged as `runner check` judges
/// it (report_claims.cpp); or, with `note`, why its file's claims could not be read.
struct ClaimRow {
  std::string experiment;          ///< the experiment's name
  Expectation expectation;         ///< as its newest recorded file states it
  store::ExpectationResult result; ///< verdict, ratio and interval
  std::string note;                ///< non-empty: nothing else is set
};

/// Everything a report shows.
struct ReportInput {
  std::string selectors;     ///< as given on the command line
  std::string database;      ///< path of the store
  std::string generated_at;  ///< ISO-8601 UTC
  std::vector<store::RunDetail> runs;                          ///< every selected run
  std::map<std::int64_t, std::vector<store::Sample>> samples;  ///< by run id
  std::map<std::int64_t, std::vector<store::OpStat>> ops;       ///< profiled runs, by run id
  /// Two sides were asked for (two selectors, or --by): their names, and
  /// their comparison when both have finished runs (else `comparison_note`).
  std::optional<std::pair<std::string, std::string>> sides;
  std::optional<SideComparison> comparison;
  std::string comparison_note;
  std::string compared_key;  ///< the --by key, "" for two selectors
  std::vector<ConfigDifference> config_differences;  ///< other than compared_key
  std::vector<HistoryPoint> history;
  std::vector<ClaimRow> claims;  ///< the [[expect]] tables of the runs' experiments
};

/// Every [[expect]] of the experiments `runs` belong to (their newest
/// recorded file that states any), judged from every finished run of their
/// trials in `db`, in experiment then file order.
[[nodiscard]] std::vector<ClaimRow> judge_claims(const store::Store& db,
                                                 const std::vector<store::RunDetail>& runs);

/// The whole page.
[[nodiscard]] std::string render_report(const ReportInput& input);

}  // namespace runner::cli
