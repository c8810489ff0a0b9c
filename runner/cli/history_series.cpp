// The series of `runner history` (see history_series.hpp).
#include "history_series.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/common/strings.hpp"

namespace runner::cli {
namespace {

// Every metric --metric takes: what compare reads for any run kind.
std::vector<MetricSpec> known_metrics() {
  std::vector<MetricSpec> out;
  std::set<std::string> seen;
  for (const char* headline : {"step_time", "latency", "call_time"})
    for (const MetricSpec& m : compared_metrics(headline))
      if (seen.insert(m.name).second) out.push_back(m);
  return out;
}

std::optional<std::string> axis_value(const store::RunDetail& run, const HistoryAxis& axis) {
  switch (axis.kind) {
    case HistoryAxis::Kind::time: return run.row.started_at;
    case HistoryAxis::Kind::label: {
      const auto it = run.labels.find(axis.key);
      if (it == run.labels.end()) return std::nullopt;
      return it->second;
    }
    case HistoryAxis::Kind::fingerprint: {
      const auto fingerprint = parse_json_object(run.fingerprint_json);
      const auto it = fingerprint.find(axis.key);
      if (it == fingerprint.end()) return std::nullopt;
      return it->second;
    }
  }
  return std::nullopt;
}

std::string series_name(const store::RunDetail& run) {
  return run.row.experiment + (run.row.label.empty() ? "" : " (" + run.row.label + ")");
}

}  // namespace

HistoryAxis parse_axis(const std::string& along) {
  HistoryAxis axis;
  axis.text = along;
  if (along == "time") return axis;
  if (along.empty())
    throw Error("--along needs an axis: time, label:KEY or a fingerprint key such as software.torch_version");
  if (along.rfind("label:", 0) == 0) {
    axis.kind = HistoryAxis::Kind::label;
    axis.key = along.substr(6);
    if (axis.key.empty())
      throw Error("--along label: needs a label key, e.g. --along label:commit");
    return axis;
  }
  axis.kind = HistoryAxis::Kind::fingerprint;
  axis.key = along;
  return axis;
}

std::vector<SeriesPoint> group_points(const std::vector<AxisRun>& runs,
                                      const std::vector<std::string>& order,
                                      std::size_t& not_ordered, bool one_per_run) {
  std::vector<SeriesPoint> points;
  if (one_per_run) {
    // Runs started in the same millisecond are still two points.
    for (const AxisRun& r : runs) points.push_back({r.at, {r.run_id}, {r.value}, r.value});
    return points;
  }
  std::map<std::string, std::size_t> index;
  for (const std::string& value : order)
    if (index.emplace(value, points.size()).second) points.push_back({value, {}, {}, 0});
  for (const AxisRun& r : runs) {
    auto it = index.find(r.at);
    if (it == index.end()) {
      if (!order.empty()) {
        ++not_ordered;
        continue;
      }
      it = index.emplace(r.at, points.size()).first;
      points.push_back({r.at, {}, {}, 0});
    }
    points[it->second].runs.push_back(r.run_id);
    points[it->second].values.push_back(r.value);
  }
  // A value --order names that no run has is no point (a commit without runs).
  std::erase_if(points, [](const SeriesPoint& p) { return p.values.empty(); });
  for (SeriesPoint& p : points) p.median = store::median(p.values);
  return points;
}

std::vector<store::ChangePoint> changes_of(const std::vector<SeriesPoint>& points) {
  std::vector<std::vector<double>> values;
  for (const SeriesPoint& p : points) values.push_back(p.values);
  return store::find_change_points(values);
}

std::vector<HistorySeries> build_history(const std::vector<store::RunDetail>& runs,
                                         const HistoryRequest& request) {
  const std::vector<MetricSpec> known = known_metrics();
  std::optional<MetricSpec> chosen;
  if (request.metric) {
    for (const MetricSpec& m : known)
      if (m.name == *request.metric) chosen = m;
    if (!chosen) {
      std::vector<std::string> names;
      for (const MetricSpec& m : known) names.push_back(m.name);
      throw Error("--metric: unknown metric '" + *request.metric + "'",
                  "one of " + join(names, ", "));
    }
  }
  // Runs in start order, grouped by configuration in order of first appearance.
  std::vector<const store::RunDetail*> ordered;
  for (const auto& run : runs) ordered.push_back(&run);
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    if (a->row.started_at != b->row.started_at) return a->row.started_at < b->row.started_at;
    return a->row.id < b->row.id;
  });
  std::vector<HistorySeries> series;
  std::map<std::string, std::size_t> by_hash;
  std::vector<std::vector<AxisRun>> axis_runs;
  std::size_t on_axis = 0, with_metric = 0;
  for (const store::RunDetail* run : ordered) {
    auto [it, added] = by_hash.emplace(run->config_hash, series.size());
    if (added) {
      HistorySeries s;
      s.name = series_name(*run);
      s.config_hash = run->config_hash;
      s.metric = chosen ? *chosen : compared_metrics(headline_metric(run->row.kind)).front();
      series.push_back(std::move(s));
      axis_runs.emplace_back();
    }
    HistorySeries& s = series[it->second];
    if (std::find(s.trials.begin(), s.trials.end(), run->row.trial_id) == s.trials.end())
      s.trials.push_back(run->row.trial_id);
    std::vector<double> values;
    add_run_values(*run, s.metric.name, values);
    if (values.empty()) continue;
    ++with_metric;
    const std::optional<std::string> at = axis_value(*run, request.axis);
    if (!at) {
      ++s.without_axis;
      continue;
    }
    ++on_axis;
    axis_runs[it->second].push_back({*at, run->row.id, values.front()});
  }
  if (with_metric == 0)
    throw Error("--metric: no selected finished run recorded " +
                    (chosen ? "'" + chosen->name + "'" : std::string("its headline metric")),
                "runner show RUN lists what a run recorded");
  if (on_axis == 0) {
    if (request.axis.kind == HistoryAxis::Kind::label)
      throw Error("--along " + request.axis.text + ": no selected run carries the label '" +
                      request.axis.key + "'",
                  "label runs with runner run ... --label " + request.axis.key + "=VALUE");
    throw Error("--along " + request.axis.text + ": no selected run's fingerprint has the key '" +
                    request.axis.key + "'",
                "the axis is time, label:KEY or a fingerprint key such as software.torch_version "
                "(runner show RUN lists a run's fingerprint)");
  }
  for (std::size_t i = 0; i < series.size(); ++i) {
    series[i].points = group_points(axis_runs[i], request.order, series[i].not_ordered,
                                    request.axis.kind == HistoryAxis::Kind::time);
    series[i].changes = changes_of(series[i].points);
  }
  return series;
}

bool last_change_regresses(const HistorySeries& series, double pct) {
  if (series.changes.empty()) return false;
  const store::RatioInterval& r = series.changes.back().ratio;
  if (series.metric.direction == store::Direction::lower_is_better) return r.lower > 1 + pct / 100;
  return r.upper < 1 - pct / 100;
}

}  // namespace runner::cli
