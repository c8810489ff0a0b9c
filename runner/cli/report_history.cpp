// The report's history panel (docs/report.md): per configuration, every
// recorded run's headline over time, or over its commits when the runs carry
// a `commit` label, with the change points `runner history` finds marked
// (history_series.cpp, store::find_change_points).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <sstream>

#include "history_series.hpp"
#include "report_parts.hpp"
#include "table.hpp"

namespace runner::cli::report {
namespace {

// A time axis anyone reads the same way: 24-hour UTC labels whose
// granularity follows the span (seconds, minutes, hours, days, months,
// years), at least two ticks on whole units, the date in every label when the
// ticks cross midnight, else in the title.
struct TimeAxis {
  double from_ms = 0, to_ms = 0;  ///< the scale's domain, on ticks
  std::vector<double> ticks_ms;
  std::string format;             ///< d3 time format, read in UTC
  std::string title;
};

// Milliseconds since the epoch of "2026-11-27T17:01:44.049Z" (the store's
// ISO-8601 UTC); nullopt for any other text.
std::optional<double> utc_ms(const std::string& iso) {
  std::tm tm{};
  double seconds = 0;
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%lf", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &seconds) != 6)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(::timegm(&tm)) * 1000 + std::round(seconds * 1000);
}

std::string utc_text(double ms, const char* format) {
  const auto t = static_cast<std::time_t>(std::floor(ms / 1000));
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[64];
  std::strftime(text, sizeof text, format, &tm);
  return text;
}

// Months since year 0 of a time, and back.
long month_index(double ms) {
  const auto t = static_cast<std::time_t>(std::floor(ms / 1000));
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return (tm.tm_year + 1900L) * 12 + tm.tm_mon;
}
double month_start_ms(long index) {
  std::tm tm{};
  tm.tm_year = static_cast<int>(index / 12) - 1900;
  tm.tm_mon = static_cast<int>(index % 12);
  tm.tm_mday = 1;
  return static_cast<double>(::timegm(&tm)) * 1000;
}

TimeAxis time_axis(double first_ms, double last_ms) {
  // About 120 px a label on a 720 px chart.
  constexpr double max_ticks = 6;
  constexpr double second = 1000, minute = 60 * second, hour = 60 * minute, day = 24 * hour;
  TimeAxis axis;
  const auto fixed_steps = {1 * second, 2 * second, 5 * second, 10 * second, 15 * second,
                            30 * second, 1 * minute, 2 * minute, 5 * minute, 10 * minute,
                            15 * minute, 30 * minute, 1 * hour, 2 * hour, 3 * hour, 6 * hour,
                            12 * hour, 1 * day, 2 * day, 7 * day, 14 * day};
  for (const double step : fixed_steps) {
    const double from = std::floor(first_ms / step) * step;
    double to = std::ceil(last_ms / step) * step;
    if (to <= from) to = from + step;
    if ((to - from) / step + 1 > max_ticks) continue;
    for (double t = from; t <= to; t += step) axis.ticks_ms.push_back(t);
    axis.from_ms = from;
    axis.to_ms = to;
    const bool one_date = utc_text(from, "%F") == utc_text(to, "%F");
    if (step >= day) {
      axis.format = "%Y-%m-%d";
      axis.title = "started (UTC)";
    } else {
      const std::string clock = step < minute ? "%H:%M:%S" : "%H:%M";
      axis.format = one_date ? clock : "%d %b " + clock;
      axis.title = one_date ? "started (UTC, " + utc_text(from, "%F") + ")"
                            : "started (UTC, " + utc_text(from, "%Y") + ")";
    }
    return axis;
  }
  // Longer spans: whole months, then whole years.
  for (const long step : {1L, 2L, 3L, 6L, 12L, 24L, 60L, 120L, 240L, 600L}) {
    const long from = month_index(first_ms) / step * step;
    long to = (month_index(last_ms) + step) / step * step;
    if (static_cast<double>(to - from) / static_cast<double>(step) + 1 > max_ticks) continue;
    for (long m = from; m <= to; m += step) axis.ticks_ms.push_back(month_start_ms(m));
    axis.from_ms = axis.ticks_ms.front();
    axis.to_ms = axis.ticks_ms.back();
    axis.format = step < 12 ? "%Y-%m" : "%Y";
    axis.title = "started (UTC)";
    return axis;
  }
  axis.from_ms = first_ms;
  axis.to_ms = last_ms;
  axis.format = "%Y";
  axis.title = "started (UTC)";
  return axis;
}


// The run label that names the history's axis when runs carry it.
constexpr const char* kAxisLabel = "commit";

// A change point as the chart marks it: where the new level starts on the
// x axis, and what it changed by.
json change_marks(const std::vector<SeriesPoint>& points, const std::vector<store::ChangePoint>& changes,
                  bool by_label) {
  json marks = json::array();
  for (const store::ChangePoint& c : changes) {
    const std::string& at = points[c.index].at;
    json x;
    if (by_label) {
      x = at;
    } else {
      const std::optional<double> ms = utc_ms(at);
      if (!ms) continue;
      x = *ms;
    }
    marks.push_back({{"x", x},
                     {"change", fixed(c.ratio.ratio, 3) + "x " + (c.ratio.ratio > 1 ? "slower" : "faster")},
                     {"ci", "[" + fixed(c.ratio.lower, 3) + ", " + fixed(c.ratio.upper, 3) + "]"},
                     {"p", c.p_value},
                     {"at", at}});
  }
  return marks;
}

}  // namespace

std::string history_charts(Charts& charts, const ReportInput& in) {
  std::map<std::string, std::vector<const HistoryPoint*>> by_config;
  std::vector<std::string> order;
  for (const HistoryPoint& p : in.history) {
    if (!by_config.count(p.config_hash)) order.push_back(p.config_hash);
    by_config[p.config_hash].push_back(&p);
  }
  std::ostringstream out;
  for (const std::string& hash : order) {
    const auto& points = by_config[hash];
    // Runs that carry the axis label are drawn by it; the others, then, are
    // left out (and counted in the title).
    const bool by_label = std::any_of(points.begin(), points.end(),
                                      [](const HistoryPoint* p) { return !p->axis_label.empty(); });
    json values = json::array();
    std::vector<AxisRun> runs;
    std::size_t unlabelled = 0;
    double first = INFINITY, last = -INFINITY;
    for (const HistoryPoint* p : points) {
      const std::optional<double> at = utc_ms(p->started_at);
      if (!at) continue;
      if (by_label && p->axis_label.empty()) {
        ++unlabelled;
        continue;
      }
      first = std::min(first, *at);
      last = std::max(last, *at);
      json value = {{"run", "run " + std::to_string(p->run_id)},
                    {"x", by_label ? json(p->axis_label) : json(*at)},
                    {"started", p->started_at},
                    {"ms", p->headline_ns / 1e6},
                    {"build", p->build},
                    {"commit", p->commit}};
      values.push_back(std::move(value));
      if (p->headline_ns > 0)
        runs.push_back({by_label ? p->axis_label : p->started_at, p->run_id, p->headline_ns});
    }
    if (values.empty()) continue;
    std::size_t not_ordered = 0;
    const std::vector<SeriesPoint> series = group_points(runs, {}, not_ordered, !by_label);
    const json marks = change_marks(series, changes_of(series), by_label);
    json x;
    if (by_label) {
      json sort = json::array();
      for (const SeriesPoint& s : series) sort.push_back(s.at);
      x = {{"field", "x"},
           {"type", "ordinal"},
           {"title", std::string(kAxisLabel) + " (run label), in order of first run"},
           {"sort", sort},
           {"axis", {{"labelAngle", -40}, {"labelLimit", 120}}}};
    } else {
      const TimeAxis axis = time_axis(first, last);
      x = {{"field", "x"},
           {"type", "temporal"},
           {"title", axis.title},
           {"scale", {{"type", "utc"}, {"domain", {axis.from_ms, axis.to_ms}}}},
           // The scale's type makes the labels UTC (a formatType would
           // need Vega-Lite's custom format types).
           {"axis", {{"values", axis.ticks_ms}, {"format", axis.format}, {"labelOverlap", false}}}};
    }
    const std::string headline = points.front()->headline;
    json layers = json::array();
    layers.push_back(
        {{"data", {{"values", values}}},
         {"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}},
         {"encoding",
          {{"x", x},
           {"y", {{"field", "ms"}, {"type", "quantitative"}, {"title", headline + " (ms)"},
                  {"scale", {{"zero", false}}}}},
           {"color", {{"field", "build"}, {"type", "nominal"}, {"title", "plugin build"}}},
           {"tooltip", json::array({{{"field", "run"}}, {{"field", "started"}},
                                    {{"field", "ms"}, {"format", ".4f"}}, {{"field", "build"}},
                                    {{"field", "commit"}, {"title", "runner commit"}}})}}}});
    if (!marks.empty()) {
      const json tooltip = json::array({{{"field", "at"}, {"title", "new level from"}},
                                        {{"field", "change"}}, {{"field", "ci"}, {"title", "95% CI"}},
                                        {{"field", "p"}, {"format", ".3f"}}});
      layers.push_back({{"data", {{"values", marks}}},
                        {"mark", {{"type", "rule"}, {"color", "#c0392b"}, {"strokeDash", {6, 3}},
                                  {"strokeWidth", 1.5}}},
                        {"encoding", {{"x", x}, {"tooltip", tooltip}}}});
      layers.push_back({{"data", {{"values", marks}}},
                        {"mark", {{"type", "text"}, {"color", "#c0392b"}, {"align", "left"},
                                  {"baseline", "top"}, {"dx", 4}, {"y", 2}}},
                        {"encoding", {{"x", x}, {"text", {{"field", "change"}}}}}});
    }
    std::string title = points.front()->title + ": " + headline + " p50 of every recorded run of this configuration";
    if (!marks.empty()) title += " (dashed: change points)";
    if (unlabelled > 0) title += " (" + std::to_string(unlabelled) + " run(s) without a commit label left out)";
    json spec = {{"title", title}, {"width", 720}, {"height", 200}, {"layer", layers}};
    out << charts.add(std::move(spec));
  }
  return out.str();
}

}  // namespace runner::cli::report
