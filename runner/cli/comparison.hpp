// Two sides of runs compared metric by metric, as `runner compare` prints
// them and `runner report` draws them: the fingerprint diff, the ratio of
// per-run medians with its bootstrap interval and the verdict against the
// practical-equivalence margin, and how the runs were laid out in time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/store/fingerprint_diff.hpp"
#include "runner/store/schedule_check.hpp"
#include "runner/store/statistics.hpp"
#include "selection.hpp"

namespace runner::cli {

/// What a metric is, for its verdict's words: a time ("faster" when B takes
/// less), a throughput, a memory peak ("smaller" when B needs less) or a
/// model's quality on held-out data ("better" when B's is better).
enum class MetricKind { time, throughput, memory, quality };

struct MetricSpec {
  std::string name;
  store::Direction direction;
  MetricKind kind;
};

/// One compared metric.
struct MetricRow {
  MetricSpec spec;
  store::Comparison result;
  double margin_pct = 0;  ///< practical-equivalence margin used
  store::Practical practical = store::Practical::undecided;
};

/// Everything compared between two sides.
struct SideComparison {
  std::string headline;           ///< step_time, latency or call_time (side A's kind)
  std::vector<MetricRow> rows;    ///< the headline first, then every metric both sides have
  store::FingerprintDiff diff;    ///< side A's first run's fingerprint against side B's
  std::size_t fingerprints_a = 0, fingerprints_b = 0;  ///< distinct fingerprints per side
  std::optional<store::ScheduleCheck> schedule;        ///< of the headline metric
};

/// The metrics a comparison reads, in order (the headline first).
[[nodiscard]] std::vector<MetricSpec> compared_metrics(const std::string& headline);

/// Per-run values of a metric: the run's p50 of a per-step series, or a
/// scalar metric (positive and finite only).
void add_run_values(const store::RunDetail& run, const std::string& metric,
                    std::vector<double>& out);

/// Compares two non-empty sides of finished runs; `margin` in percent
/// (nullopt: each metric's run-to-run noise, see store::noise_margin_pct).
[[nodiscard]] SideComparison compare_sides(const Side& a, const Side& b,
                                           std::optional<double> margin);

/// The verdict in the metric's own words, read against the margin.
[[nodiscard]] std::string verdict_text(const MetricRow& row);

/// The interval cell of a row, "[0.531, 0.554]"; "-" for a deterministic row (no spread, no interval).
[[nodiscard]] std::string interval_cell(const MetricRow& row);

/// The p cell of a row, "0.1000"; "-" for a deterministic row (no spread, no test).
[[nodiscard]] std::string p_cell(const MetricRow& row);

/// The line `compare` prints before its table when the sizes of a compared
/// metric cannot reach p < alpha, with the runs a side that could; "" otherwise.
[[nodiscard]] std::string sample_size_note(const SideComparison& c);

/// The note after the table on held-out metrics with one value per side
/// (one seed), pointing to a seed sweep for a spread; "" when there are none.
[[nodiscard]] std::string seed_note(const SideComparison& c);

/// A value of the metric for people: "12.0 ms", "41.2 MB", "1.23e+03".
[[nodiscard]] std::string format_metric(double value, MetricKind kind);

}  // namespace runner::cli
