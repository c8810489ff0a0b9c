// The charts of `runner report` (docs/report.md): Vega-Lite specifications
// of the forest plot, the step-time boxes, the loss and evaluation lines and
// the sweep (the history panel is report_history.cpp). Every number comes from the store's statistics
// (store/include/runner/store/statistics.hpp), as `runner compare`'s do.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "report_parts.hpp"
#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/statistics.hpp"
#include "table.hpp"

namespace runner::cli::report {
namespace {

// The headline metric against each swept key: one point per trial (the median
// over its finished runs, with a bootstrap 95% interval), one line per value
// of the other swept keys.
std::string experiment_sweep_charts(Charts& charts, const std::string& experiment,
                                   const std::vector<const TrialGroup*>& trials) {
  std::vector<std::string> keys;
  for (const TrialGroup* g : trials)
    for (const std::string& key : label_keys(g->runs.front()->row.label))
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  std::ostringstream out;
  for (const std::string& key : keys) {
    std::set<std::string> distinct;
    json values = json::array();
    bool numeric = true;
    std::string headline;
    for (const TrialGroup* trial : trials) {
      const TrialGroup& g = *trial;
      if (g.finished.empty()) continue;
      const store::RunDetail& first = *g.runs.front();
      headline = headline_metric(first.row.kind);
      std::vector<double> per_run;
      for (const auto* run : g.finished)
        if (const auto* s = summary_of(*run, headline)) per_run.push_back(s->p50 / 1e6);
      if (per_run.empty()) continue;
      const json config = parse_json(first.config_json);
      const std::string value = trial_value(config, first.row.label, key);
      distinct.insert(value);
      const std::optional<double> number = parse_double(value);
      numeric = numeric && number.has_value();
      std::vector<std::string> others;
      for (const std::string& other : label_keys(first.row.label))
        if (other != key) others.push_back(other + "=" + trial_value(config, first.row.label, other));
      const store::MedianInterval m = store::bootstrap_median(per_run);
      json point = {{"value", value},
                    {"median", m.median},
                    {"lower", m.lower},
                    {"upper", m.upper},
                    {"runs", per_run.size()},
                    {"trial", "trial " + std::to_string(g.id)},
                    {"others", others.empty() ? std::string("all trials") : join(others, " ")}};
      if (number) point["number"] = *number;
      values.push_back(std::move(point));
    }
    if (distinct.size() < 2) continue;
    const json x = numeric ? json{{"field", "number"}, {"type", "quantitative"}, {"title", key},
                                  {"scale", {{"zero", false}}}}
                           : json{{"field", "value"}, {"type", "ordinal"}, {"title", key},
                                  {"sort", nullptr}};
    const json color = {{"field", "others"}, {"type", "nominal"}, {"title", "other keys"}};
    json spec = {
        {"title", experiment + ": " + headline + " (median over runs, 95% CI) against " + key},
        {"width", 520},
        {"height", 240},
        {"data", {{"values", values}}},
        {"layer",
         json::array(
             {{{"mark", {{"type", "rule"}}},
               {"encoding", {{"x", x},
                             {"y", {{"field", "lower"}, {"type", "quantitative"},
                                    {"title", headline + " (ms)"}, {"scale", {{"zero", false}}}}},
                             {"y2", {{"field", "upper"}}}, {"color", color}}}},
              {{"mark", {{"type", "line"}, {"point", true}}},
               {"encoding",
                {{"x", x},
                 {"y", {{"field", "median"}, {"type", "quantitative"}}},
                 {"color", color},
                 {"tooltip", json::array({{{"field", "trial"}}, {{"field", "value"}, {"title", key}},
                                          {{"field", "median"}, {"format", ".4f"}},
                                          {{"field", "lower"}, {"format", ".4f"}},
                                          {{"field", "upper"}, {"format", ".4f"}},
                                          {{"field", "runs"}}})}}}}})}};
    out << charts.add(std::move(spec));
  }
  return out.str();
}

}  // namespace

std::string forest_plot(Charts& charts, const SideComparison& c) {
  static constexpr const char* kSpread = "per-run values";
  static constexpr const char* kNoSpread = "none: the same value in every run";
  // Good news green, bad news red, "no difference" grey, "cannot tell"
  // orange; a metric without spread (the same value in every run of a side)
  // has an exact ratio, no interval and no test: "differs" purple, "same"
  // teal, drawn as a diamond without a line, never in a significant colour.
  static const std::vector<std::pair<std::string, std::string>> palette = {
      {"faster", "#1a7f37"}, {"better", "#1a7f37"}, {"smaller", "#1a7f37"},
      {"slower", "#cf222e"}, {"worse", "#cf222e"},  {"larger", "#cf222e"},
      {"equivalent", "#6e7781"}, {"undecided", "#d4821f"}, {"differs", "#8250df"},
      {"same", "#1b7c83"}};
  json values = json::array();
  std::set<std::string> calls;
  for (const MetricRow& row : c.rows) {
    const auto& r = row.result;
    const std::string call = verdict_word(verdict_text(row));
    calls.insert(call);
    json value = {{"metric", row.spec.name},
                  {"ratio", r.ratio.ratio},
                  {"interval", interval_cell(row)},
                  {"p", p_cell(row)},
                  {"verdict", verdict_text(row)},
                  {"call", call},
                  {"spread", r.deterministic ? kNoSpread : kSpread}};
    if (!r.deterministic) {
      value["lower"] = r.ratio.lower;
      value["upper"] = r.ratio.upper;
    }
    values.push_back(std::move(value));
  }
  // The legend names only the verdicts drawn.
  json domain = json::array(), range = json::array();
  for (const auto& [call, colour] : palette)
    if (calls.count(call)) {
      domain.push_back(call);
      range.push_back(colour);
    }
  // The table's order: the rows without an interval are not in the interval
  // layer, so the union of the layers' values would put them last.
  json metrics = json::array();
  for (const MetricRow& row : c.rows) metrics.push_back(row.spec.name);
  const json y = {{"field", "metric"}, {"type", "nominal"}, {"scale", {{"domain", metrics}}},
                  {"title", nullptr}};
  const json x_scale = {{"zero", false}};
  const json verdict_color = {{"field", "call"},
                              {"type", "nominal"},
                              {"title", "verdict"},
                              {"scale", {{"domain", domain}, {"range", range}}}};
  json shapes = json::array(), spreads = json::array();
  for (const auto& [spread, shape] : {std::pair{kSpread, "circle"}, {kNoSpread, "diamond"}})
    if (std::any_of(values.begin(), values.end(), [&](const json& v) { return v["spread"] == spread; })) {
      spreads.push_back(spread);
      shapes.push_back(shape);
    }
  const json shape = {{"field", "spread"},
                      {"type", "nominal"},
                      {"title", "spread across runs"},
                      {"scale", {{"domain", spreads}, {"range", shapes}}}};
  json spec = {
      {"title", "B / A per metric (ratio of per-run medians, 95% bootstrap CI)"},
      {"width", 640},
      {"height", {{"step", 26}}},
      {"data", {{"values", values}}},
      {"layer",
       json::array(
           {{{"mark", {{"type", "rule"}, {"color", "#888"}, {"strokeDash", {4, 4}}}},
             {"data", {{"values", json::array({{{"one", 1}}})}}},
             {"encoding", {{"x", {{"field", "one"}, {"type", "quantitative"}}}}}},
            {{"transform", json::array({{{"filter", "isValid(datum.lower)"}}})},
             {"mark", {{"type", "rule"}, {"strokeWidth", 2}}},
             {"encoding",
              {{"y", y},
               {"x", {{"field", "lower"}, {"type", "quantitative"}, {"scale", x_scale},
                      {"title", "B / A"}}},
               {"x2", {{"field", "upper"}}},
               {"color", verdict_color}}}},
            {{"mark", {{"type", "point"}, {"filled", true}, {"size", 70}}},
             {"encoding",
              {{"y", y},
               {"x", {{"field", "ratio"}, {"type", "quantitative"}, {"scale", x_scale},
                      {"title", "B / A"}}},
               {"color", verdict_color},
               {"shape", shape},
               {"tooltip",
                json::array({{{"field", "metric"}},
                             {{"field", "ratio"}, {"format", ".4f"}},
                             {{"field", "interval"}, {"title", "95% CI"}},
                             {{"field", "p"}},
                             {{"field", "verdict"}}})}}}}})}};
  return charts.add(std::move(spec));
}

// Per run and phase, the distribution of step times: warm-up and profiled
// steps (which profiling slows down) apart from the measured ones.
// Drawn from quantiles computed here, so the page stays small for long runs.
std::string phase_boxes(Charts& charts, const ReportInput& in) {
  json values = json::array();
  for (const auto& run : in.runs) {
    const auto it = in.samples.find(run.row.id);
    if (it == in.samples.end() || it->second.empty()) continue;
    const std::string headline = headline_metric(run.row.kind);
    std::vector<std::pair<std::string, std::function<double(const store::Sample&)>>> series;
    series.emplace_back(headline, [](const store::Sample& s) { return s.wall_ns; });
    for (const store::PhaseInfo& phase : store::kPhases) {
      const store::Phase p = phase.phase;
      series.emplace_back(phase.name, [p](const store::Sample& s) { return s.phase(p); });
    }
    for (const auto& [name, value_of] : series) {
      std::map<std::string, std::vector<double>> by_stage;
      for (const store::Sample& s : it->second) {
        const double v = value_of(s);
        if (!(v > 0) || !std::isfinite(v)) continue;  // a log axis: 0 ns is not drawn
        by_stage[s.warmup ? "warm-up" : s.profiled ? "profiled" : "measured"].push_back(v / 1e6);
      }
      for (auto& [stage, v] : by_stage) {
        std::sort(v.begin(), v.end());
        values.push_back({{"run", run_name(run)},
                          {"phase", name},
                          {"stage", stage},
                          {"n", v.size()},
                          {"min", v.front()},
                          {"p5", store::percentile_sorted(v, 5)},
                          {"q1", store::percentile_sorted(v, 25)},
                          {"median", store::percentile_sorted(v, 50)},
                          {"q3", store::percentile_sorted(v, 75)},
                          {"p95", store::percentile_sorted(v, 95)},
                          {"max", v.back()}});
      }
    }
  }
  if (values.empty()) return "<p class=\"note\">No samples recorded for these runs.</p>\n";
  // The headlines first, then the phases in the order a step takes them.
  json phase_order = {"step_time", "latency", "call_time"};
  for (const store::PhaseInfo& phase : store::kPhases) phase_order.push_back(phase.name);
  // The legend names only the kinds of steps drawn: a run without profiling
  // has no "profiled" entry.
  std::set<std::string> stages_present;
  for (const auto& v : values) stages_present.insert(v["stage"].get<std::string>());
  json domain = json::array(), range = json::array();
  for (const auto& [stage, colour] : {std::pair{"measured", "#1f5f99"}, {"warm-up", "#f58518"},
                                      {"profiled", "#b279a2"}})
    if (stages_present.count(stage)) {
      domain.push_back(stage);
      range.push_back(colour);
    }
  const json x = {{"field", "run"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr}};
  const json color = {{"field", "stage"}, {"type", "nominal"},
                      {"scale", {{"domain", domain}, {"range", range}}}, {"title", "steps"}};
  const json offset = {{"field", "stage"}, {"type", "nominal"}, {"sort", domain}};
  const json tooltip = json::array({{{"field", "run"}},
                                    {{"field", "phase"}},
                                    {{"field", "stage"}},
                                    {{"field", "n"}},
                                    {{"field", "min"}, {"format", ".4f"}},
                                    {{"field", "median"}, {"format", ".4f"}},
                                    {{"field", "p95"}, {"format", ".4f"}},
                                    {{"field", "max"}, {"format", ".4f"}}});
  // The measured steps are what the run is about: a wide solid box with a
  // dark median bar, visible even when the quartiles coincide. The discarded
  // warm-up (and profiled) steps stay beside them, narrow and faint, so their
  // spread, often 100x the measured one, does not draw the eye.
  const auto stage_layers = [&](bool measured) {
    const json filter = {{"filter", measured ? "datum.stage === 'measured'" : "datum.stage !== 'measured'"}};
    const double width = measured ? 14 : 6, opacity = measured ? 1.0 : 0.35;
    return json::array(
        {{{"transform", json::array({filter})},
          {"mark", {{"type", "rule"}, {"opacity", opacity}, {"strokeWidth", measured ? 1.5 : 1}}},
          {"encoding", {{"x", x}, {"xOffset", offset},
                        {"y", {{"field", "p5"}, {"type", "quantitative"}, {"title", "ms (log)"},
                               {"scale", {{"type", "log"}}}}},
                        {"y2", {{"field", "p95"}}}, {"color", color}}}},
         {{"transform", json::array({filter})},
          {"mark", {{"type", "bar"}, {"size", width}, {"opacity", opacity}}},
          {"encoding", {{"x", x}, {"xOffset", offset},
                        {"y", {{"field", "q1"}, {"type", "quantitative"}}},
                        {"y2", {{"field", "q3"}}}, {"color", color}, {"tooltip", tooltip}}}},
         {{"transform", json::array({filter})},
          {"mark", {{"type", "tick"}, {"size", width}, {"thickness", measured ? 3 : 1},
                    {"color", measured ? "#0b2239" : "white"}, {"opacity", measured ? 1.0 : 0.8}}},
          {"encoding", {{"x", x}, {"xOffset", offset},
                        {"y", {{"field", "median"}, {"type", "quantitative"}}},
                        {"tooltip", tooltip}}}}});
  };
  json layers = stage_layers(true);
  if (stages_present.size() > stages_present.count("measured"))
    for (auto& layer : stage_layers(false)) layers.push_back(std::move(layer));
  // One panel per phase with only the runs that have it, each with its own
  // log axis: warm-up steps are often 100x the measured ones, and both must
  // stay readable.
  std::set<std::string> present;
  for (const auto& v : values) present.insert(v["phase"].get<std::string>());
  json panels = json::array();
  for (const auto& phase : phase_order) {
    const std::string name = phase.get<std::string>();
    if (!present.count(name)) continue;
    panels.push_back({{"title", name},
                      {"width", {{"step", 12}}},
                      {"height", 170},
                      {"transform", json::array({{{"filter", {{"field", "phase"}, {"equal", name}}}}})},
                      {"layer", layers}});
  }
  json spec = {
      {"title", "Step time by phase (ms, log scale): box = quartiles, bar across it = median, "
                "whiskers = 5th-95th percentile (min and max in the tooltip); faint: steps not measured"},
      {"data", {{"values", values}}},
      {"concat", panels},
      // As many panels side by side as fit the page: 12 px per box, up to
      // three boxes (measured, warm-up, profiled) per run, plus the axis.
      {"columns", std::clamp<std::size_t>(1000 / (12 * stages_present.size() * in.runs.size() + 100), 1, 3)}};
  return charts.add(std::move(spec));
}

// A line per run over steps, at most `points` points each (every k-th step).
std::string loss_lines(Charts& charts, const ReportInput& in) {
  constexpr std::size_t points = 400;
  json values = json::array();
  for (const auto& run : in.runs) {
    const auto it = in.samples.find(run.row.id);
    if (it == in.samples.end()) continue;
    std::vector<const store::Sample*> with_loss;
    for (const auto& s : it->second)
      if (std::isfinite(s.loss)) with_loss.push_back(&s);
    const std::size_t stride = std::max<std::size_t>(1, (with_loss.size() + points - 1) / points);
    for (std::size_t i = 0; i < with_loss.size(); ++i)
      if (i % stride == 0 || i + 1 == with_loss.size())
        values.push_back({{"run", run_name(run) + " " + run.row.label},
                          {"step", with_loss[i]->step},
                          {"loss", with_loss[i]->loss}});
  }
  if (values.empty()) return {};
  json spec = {{"title", "Training loss over steps (warm-up included)"},
               {"width", 720},
               {"height", 260},
               {"data", {{"values", values}}},
               {"mark", {{"type", "line"}, {"strokeWidth", 1}, {"opacity", 0.8}}},
               {"encoding",
                {{"x", {{"field", "step"}, {"type", "quantitative"}}},
                 {"y", {{"field", "loss"}, {"type", "quantitative"}, {"scale", {{"zero", false}}}}},
                 {"color", {{"field", "run"}, {"type", "nominal"}, {"title", nullptr}}},
                 {"tooltip", json::array({{{"field", "run"}}, {{"field", "step"}},
                                          {{"field", "loss"}, {"format", ".5f"}}})}}}};
  return charts.add(std::move(spec));
}

std::string evaluation_lines(Charts& charts, const ReportInput& in) {
  json values = json::array();
  for (const auto& run : in.runs)
    for (const auto& e : run.evaluations)
      if (std::isfinite(e.value))
        values.push_back({{"run", run_name(run) + " " + run.row.label},
                          {"step", e.step},
                          {"metric", e.metric},
                          {"value", e.value}});
  if (values.empty()) return {};
  json spec = {{"title", "Held-out evaluation over steps"},
               {"data", {{"values", values}}},
               {"facet", {{"field", "metric"}, {"type", "nominal"}, {"title", nullptr}}},
               {"columns", 3},
               {"resolve", {{"scale", {{"y", "independent"}}}}},
               {"spec",
                {{"width", 300},
                 {"height", 200},
                 {"mark", {{"type", "line"}, {"point", true}}},
                 {"encoding",
                  {{"x", {{"field", "step"}, {"type", "quantitative"}}},
                   {"y", {{"field", "value"}, {"type", "quantitative"}, {"scale", {{"zero", false}}}}},
                   {"color", {{"field", "run"}, {"type", "nominal"}, {"title", nullptr}}},
                   {"tooltip", json::array({{{"field", "run"}}, {{"field", "step"}},
                                            {{"field", "value"}, {"format", ".5f"}}})}}}}}};
  return charts.add(std::move(spec));
}

std::string sweep_charts(Charts& charts, const std::vector<TrialGroup>& trials) {
  std::vector<std::string> experiments;
  std::map<std::string, std::vector<const TrialGroup*>> by_experiment;
  for (const TrialGroup& g : trials) {
    const std::string& name = g.runs.front()->row.experiment;
    if (!by_experiment.count(name)) experiments.push_back(name);
    by_experiment[name].push_back(&g);
  }
  std::string out;
  for (const std::string& name : experiments)
    out += experiment_sweep_charts(charts, name, by_experiment[name]);
  return out;
}

}  // namespace runner::cli::report
