// What the parts of `runner report`'s page share (private to runner/cli):
// HTML text helpers, the chart collector, a report's runs grouped by trial,
// and the sections. report_page.cpp holds the helpers and assembles the page
// from report_charts.cpp (the Vega-Lite specifications) and
// report_tables.cpp (the tables, the comparison section, the run details).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "report_html.hpp"

namespace runner::cli::report {

using nlohmann::json;

// --- text and numbers (report_page.cpp) -------------------------------------------

// `text` escaped for HTML element content and attribute values.
std::string esc(std::string_view text);
// JSON for a <script type="application/json"> element: text from the store
// may hold anything (invalid UTF-8 is replaced, "</" cannot end the element).
std::string script_json(const json& value);
// A number cell: shown formatted, sorted by its value.
std::string num_cell(const std::optional<double>& value, const std::string& shown);
// The status as a coloured badge.
std::string status_badge(store::RunStatus status);
// "run 12".
std::string run_name(const store::RunDetail& run);
// "EXPERIMENT trial 3 (LABEL)".
std::string trial_title(const store::RunDetail& run);
// The run's summary of a per-step metric, or null when it has none.
const store::Summary* summary_of(const store::RunDetail& run, const std::string& metric);
// The run's scalar metric `name` when recorded and finite.
std::optional<double> metric_of(const store::RunDetail& run, const std::string& name);
// "faster", "undecided", ... : the first word of a verdict.
std::string verdict_word(const std::string& verdict);

// A chart: a <div> the page script fills from the specification beside it.
class Charts {
 public:
  /// The chart's <div> and its specification (the page's defaults added).
  std::string add(json spec);
  [[nodiscard]] int count() const { return count_; }

 private:
  int count_ = 0;
};

// A report's runs grouped by trial, in the order of their first run.
struct TrialGroup {
  std::int64_t id = 0;
  std::vector<const store::RunDetail*> runs;   // every selected run
  std::vector<const store::RunDetail*> finished;
};

std::vector<TrialGroup> trials_of(const ReportInput& in);

// --- charts (report_charts.cpp) ----------------------------------------------------

// The ratio per metric with its interval, 1 marked: a forest plot.
std::string forest_plot(Charts& charts, const SideComparison& c);
// Per run and phase, the distribution of step times (quantile boxes).
std::string phase_boxes(Charts& charts, const ReportInput& in);
// The training loss over steps, a line per run ("" when none was recorded).
std::string loss_lines(Charts& charts, const ReportInput& in);
// The held-out evaluation over steps, a panel per metric ("" when none).
std::string evaluation_lines(Charts& charts, const ReportInput& in);
// Per experiment, the headline against each swept key ("" when no key takes two values).
std::string sweep_charts(Charts& charts, const std::vector<TrialGroup>& trials);
// Every recorded run of each selected configuration over time, or over its
// commit labels, change points marked ("" when none; report_history.cpp).
std::string history_charts(Charts& charts, const ReportInput& in);

// --- tables (report_tables.cpp) ------------------------------------------------------

// A row per trial: runs, medians of the headline, throughput, memory, loss, accuracy.
std::string summary_table(const ReportInput& in, const std::vector<TrialGroup>& trials);
// A row per selected run, failed and interrupted ones included.
std::string runs_table(const ReportInput& in);
// The comparison of the two sides: environment, schedule warning, forest plot, verdicts.
std::string comparison_section(Charts& charts, const ReportInput& in);
// A trial's configuration and each of its runs' details.
std::string trial_details(const ReportInput& in, const TrialGroup& g);

// --- claims (report_claims.cpp) ---------------------------------------------------------

// Each [[expect]]'s verdict, its ratio and interval drawn against the claimed bound.
std::string claims_section(Charts& charts, const ReportInput& in);

}  // namespace runner::cli::report
