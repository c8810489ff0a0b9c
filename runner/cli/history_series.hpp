// The series of `runner history` and of the report's history panel: each
// configuration's runs ordered along an axis (the time, a run label, a
// fingerprint key), one point per axis value holding the runs that share it,
// and the change points of the series (store::find_change_points).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comparison.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {

/// What orders a series: `--along time`, `label:KEY` or a fingerprint key.
struct HistoryAxis {
  enum class Kind { time, label, fingerprint };
  Kind kind = Kind::time;
  std::string key;   ///< the label key or the fingerprint key; empty for time
  std::string text;  ///< as the user wrote it: "label:commit"
};

/// The axis `--along` names. Throws runner::Error (input) for an empty one
/// or "label:" without a key.
[[nodiscard]] HistoryAxis parse_axis(const std::string& along);

/// One run on an axis: its value there, its metric value, when it started.
struct AxisRun {
  std::string at;          ///< the axis value: a label value, a fingerprint value, the start time
  std::int64_t run_id = 0;
  double value = 0;        ///< the metric's per-run value (positive)
};

/// A point of a series: the runs that share one axis value.
struct SeriesPoint {
  std::string at;                   ///< the axis value
  std::vector<std::int64_t> runs;   ///< their ids, in start order
  std::vector<double> values;       ///< their metric values, in the same order
  double median = 0;                ///< of values
};

/// One configuration's series and its change points.
struct HistorySeries {
  std::string name;                 ///< "EXPERIMENT (sweep label)"
  std::string config_hash;          ///< what its runs share
  std::vector<std::int64_t> trials; ///< the trial rows its runs were recorded under
  MetricSpec metric;                ///< what was read, and which way is better
  std::vector<SeriesPoint> points;
  std::vector<store::ChangePoint> changes;  ///< by index into points
  std::size_t without_axis = 0;     ///< runs left out: no value on the axis
  std::size_t not_ordered = 0;      ///< runs left out: their value is not in --order
};

/// Groups `runs` (in start order) into points along the axis: in the order
/// each value first appears, or in `order` when it is not empty (values it
/// does not name are left out and counted in `not_ordered`); with
/// `one_per_run` (the time axis) each run is its own point.
[[nodiscard]] std::vector<SeriesPoint> group_points(const std::vector<AxisRun>& runs,
                                                    const std::vector<std::string>& order,
                                                    std::size_t& not_ordered, bool one_per_run = false);

/// The change points of a series' points.
[[nodiscard]] std::vector<store::ChangePoint> changes_of(const std::vector<SeriesPoint>& points);

/// What `runner history` reads.
struct HistoryRequest {
  std::optional<std::string> metric;  ///< --metric; nullopt: each run kind's headline
  HistoryAxis axis;
  std::vector<std::string> order;     ///< --order; empty: first appearance
};

/// The series of finished `runs`, one per configuration (config hash) in the
/// order it first appears. Throws runner::Error (input) for an unknown
/// metric, a metric no run recorded and an axis no run has a value on.
[[nodiscard]] std::vector<HistorySeries> build_history(const std::vector<store::RunDetail>& runs,
                                                       const HistoryRequest& request);

/// True when the series' last change point is a slowdown beyond `pct`
/// percent (a time: the interval's lower bound above 1 + pct/100; a
/// throughput: its upper bound below 1 - pct/100).
[[nodiscard]] bool last_change_regresses(const HistorySeries& series, double pct);

}  // namespace runner::cli
