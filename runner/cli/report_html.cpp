// The page of `runner report` (see report_html.hpp, docs/report.md). Charts
// are Vega-Lite specifications drawn in the browser by the inlined library;
// this file only chooses what to draw and lays out the tables.
#include "report_html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/common/strings.hpp"
#include "runner/experiment/config_toml.hpp"
#include "runner/store/compare.hpp"
#include "table.hpp"

namespace runner::cli {

namespace assets {
extern const std::string_view vega, vega_lite, vega_embed, page_script, page_style,
    library_versions;
}

namespace {

using nlohmann::json;

// --- text ----------------------------------------------------------------------

std::string esc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON for a <script type="application/json"> element: text from the store
// may hold anything (invalid UTF-8 is replaced, "</" cannot end the element).
std::string script_json(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '!')) {
      out += "\\u003c";
      continue;
    }
    out += text[i];
  }
  return out;
}


// A number cell: shown formatted, sorted by its value.
std::string num_cell(const std::optional<double>& value, const std::string& shown) {
  if (!value || !std::isfinite(*value)) return "<td class=\"num\" data-sort=\"\">-</td>";
  std::ostringstream sort;
  sort.precision(17);
  sort << *value;
  return "<td class=\"num\" data-sort=\"" + sort.str() + "\">" + esc(shown) + "</td>";
}

std::string status_badge(store::RunStatus status) {
  const std::string name = to_string(status);
  return "<span class=\"status status-" + name + "\">" + name + "</span>";
}

std::string run_name(const store::RunDetail& run) {
  return "run " + std::to_string(run.row.id);
}

std::string trial_title(const store::RunDetail& run) {
  std::string title = run.row.experiment + " trial " + std::to_string(run.row.trial_id);
  if (!run.row.label.empty()) title += " (" + run.row.label + ")";
  return title;
}

// --- numbers -------------------------------------------------------------------

const store::Summary* summary_of(const store::RunDetail& run, const std::string& metric) {
  for (const auto& s : run.summaries)
    if (s.metric == metric && s.n > 0) return &s;
  return nullptr;
}

std::optional<double> metric_of(const store::RunDetail& run, const std::string& name) {
  for (const auto& m : run.metrics)
    if (m.name == name && std::isfinite(m.value)) return m.value;
  return std::nullopt;
}

std::optional<double> median_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  return store::median(std::move(values));
}

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(at));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

// --- charts --------------------------------------------------------------------

// A chart: a <div> the page script fills from the specification beside it.
class Charts {
 public:
  std::string add(json spec) {
    spec["$schema"] = "https://vega.github.io/schema/vega-lite/v6.json";
    spec["config"] = {{"font", "DejaVu Sans, sans-serif"},
                      {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}}},
                      {"legend", {{"labelLimit", 360}}}};
    const std::string id = "spec-" + std::to_string(count_++);
    return "<div class=\"chart\" data-spec=\"" + id + "\"></div>\n<script type=\"application/json\" id=\"" +
           id + "\">" + script_json(spec) + "</script>\n";
  }
  [[nodiscard]] int count() const { return count_; }

 private:
  int count_ = 0;
};

// "faster", "undecided", ... : the first word of a verdict.
std::string verdict_word(const std::string& verdict) { return verdict.substr(0, verdict.find(' ')); }

// The ratio per metric with its interval, 1 marked: a forest plot.
std::string forest_plot(Charts& charts, const SideComparison& c) {
  json values = json::array();
  for (const MetricRow& row : c.rows) {
    const auto& r = row.result;
    values.push_back({{"metric", row.spec.name},
                      {"ratio", r.ratio.ratio},
                      {"lower", r.ratio.lower},
                      {"upper", r.ratio.upper},
                      {"verdict", verdict_text(row)},
                      {"call", verdict_word(verdict_text(row))},
                      {"p", r.test.p_value}});
  }
  const json y = {{"field", "metric"}, {"type", "nominal"}, {"sort", nullptr}, {"title", nullptr}};
  const json x_scale = {{"zero", false}};
  // Good news green, bad news red, "no difference" grey, "cannot tell" orange.
  const json verdict_color = {
      {"field", "call"},
      {"type", "nominal"},
      {"title", "verdict"},
      {"scale",
       {{"domain", {"faster", "better", "smaller", "slower", "worse", "larger", "equivalent",
                    "undecided"}},
        {"range", {"#1a7f37", "#1a7f37", "#1a7f37", "#cf222e", "#cf222e", "#cf222e", "#6e7781",
                   "#d4821f"}}}}};
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
            {{"mark", {{"type", "rule"}, {"strokeWidth", 2}}},
             {"encoding",
              {{"y", y},
               {"x", {{"field", "lower"}, {"type", "quantitative"}, {"scale", x_scale},
                      {"title", "B / A"}}},
               {"x2", {{"field", "upper"}}},
               {"color", verdict_color}}}},
            {{"mark", {{"type", "point"}, {"filled", true}, {"size", 70}}},
             {"encoding",
              {{"y", y},
               {"x", {{"field", "ratio"}, {"type", "quantitative"}}},
               {"color", verdict_color},
               {"tooltip",
                json::array({{{"field", "metric"}},
                             {{"field", "ratio"}, {"format", ".4f"}},
                             {{"field", "lower"}, {"format", ".4f"}},
                             {{"field", "upper"}, {"format", ".4f"}},
                             {{"field", "p"}, {"format", ".4f"}},
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
                          {"p5", quantile(v, 0.05)},
                          {"q1", quantile(v, 0.25)},
                          {"median", quantile(v, 0.5)},
                          {"q3", quantile(v, 0.75)},
                          {"p95", quantile(v, 0.95)},
                          {"max", v.back()}});
      }
    }
  }
  if (values.empty()) return "<p class=\"note\">No samples recorded for these runs.</p>\n";
  // The headlines first, then the phases in the order a step takes them.
  json phase_order = {"step_time", "latency", "call_time"};
  for (const store::PhaseInfo& phase : store::kPhases) phase_order.push_back(phase.name);
  const json x = {{"field", "run"}, {"type", "nominal"}, {"title", nullptr}, {"sort", nullptr}};
  const json color = {{"field", "stage"},
                      {"type", "nominal"},
                      {"scale", {{"domain", {"measured", "warm-up", "profiled"}},
                                 {"range", {"#4c78a8", "#f58518", "#b279a2"}}}},
                      {"title", "steps"}};
  const json offset = {{"field", "stage"}, {"type", "nominal"},
                       {"sort", {"measured", "warm-up", "profiled"}}};
  const json tooltip = json::array({{{"field", "run"}},
                                    {{"field", "phase"}},
                                    {{"field", "stage"}},
                                    {{"field", "n"}},
                                    {{"field", "min"}, {"format", ".4f"}},
                                    {{"field", "median"}, {"format", ".4f"}},
                                    {{"field", "p95"}, {"format", ".4f"}},
                                    {{"field", "max"}, {"format", ".4f"}}});
  const json layers = json::array(
      {{{"mark", {{"type", "rule"}}},
        {"encoding", {{"x", x}, {"xOffset", offset},
                      {"y", {{"field", "p5"}, {"type", "quantitative"}, {"title", "ms (log)"},
                             {"scale", {{"type", "log"}}}}},
                      {"y2", {{"field", "p95"}}}, {"color", color}}}},
       {{"mark", {{"type", "bar"}, {"size", 9}}},
        {"encoding", {{"x", x}, {"xOffset", offset},
                      {"y", {{"field", "q1"}, {"type", "quantitative"}}},
                      {"y2", {{"field", "q3"}}}, {"color", color}, {"tooltip", tooltip}}}},
       {{"mark", {{"type", "tick"}, {"color", "white"}, {"size", 9}}},
        {"encoding", {{"x", x}, {"xOffset", offset},
                      {"y", {{"field", "median"}, {"type", "quantitative"}}}}}}});
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
      {"title", "Step time by phase (ms, log scale): box = quartiles, white tick = median, "
                "whiskers = 5th-95th percentile (min and max in the tooltip)"},
      {"data", {{"values", values}}},
      {"concat", panels},
      // As many panels side by side as fit the page: 12 px per box, up to
      // three boxes (measured, warm-up, profiled) per run, plus the axis.
      {"columns", std::clamp<std::size_t>(1000 / (36 * in.runs.size() + 100), 1, 3)}};
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

// --- trials --------------------------------------------------------------------

struct TrialGroup {
  std::int64_t id = 0;
  std::vector<const store::RunDetail*> runs;   // every selected run
  std::vector<const store::RunDetail*> finished;
};

std::vector<TrialGroup> trials_of(const ReportInput& in) {
  std::vector<TrialGroup> out;
  std::map<std::int64_t, std::size_t> at;
  for (const auto& run : in.runs) {
    auto [it, fresh] = at.emplace(run.row.trial_id, out.size());
    if (fresh) out.push_back({run.row.trial_id, {}, {}});
    TrialGroup& g = out[it->second];
    g.runs.push_back(&run);
    if (run.row.status == store::RunStatus::finished) g.finished.push_back(&run);
  }
  return out;
}

// Median over a trial's finished runs of one per-run value.
template <typename F>
std::optional<double> trial_median(const TrialGroup& g, F&& value_of) {
  std::vector<double> values;
  for (const auto* run : g.finished)
    if (const std::optional<double> v = value_of(*run); v && std::isfinite(*v)) values.push_back(*v);
  return median_of(std::move(values));
}

std::string summary_table(const ReportInput& in, const std::vector<TrialGroup>& trials) {
  std::ostringstream out;
  out << "<table class=\"sortable\" id=\"trials\"><thead><tr><th>trial</th><th>experiment</th>"
         "<th>sweep point</th><th>kind</th><th class=\"num\">runs</th><th class=\"num\">finished</th>"
         "<th class=\"num\">median</th><th class=\"num\">p90</th><th class=\"num\">throughput</th>"
         "<th class=\"num\">peak memory</th><th class=\"num\">final loss</th>"
         "<th class=\"num\">eval accuracy</th></tr></thead><tbody>\n";
  for (const TrialGroup& g : trials) {
    const store::RunDetail& first = *g.runs.front();
    const std::string headline = headline_metric(first.row.kind);
    const auto p50 = trial_median(g, [&](const store::RunDetail& r) -> std::optional<double> {
      const auto* s = summary_of(r, headline);
      return s ? std::optional(s->p50) : std::nullopt;
    });
    const auto p90 = trial_median(g, [&](const store::RunDetail& r) -> std::optional<double> {
      const auto* s = summary_of(r, headline);
      return s ? std::optional(s->p90) : std::nullopt;
    });
    std::string unit = "tokens/s";
    auto throughput = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "tokens_per_s"); });
    if (!throughput) {
      unit = "samples/s";
      throughput = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "samples_per_s"); });
    }
    if (!throughput) {
      unit = "GB/s";
      throughput = trial_median(g, [](const store::RunDetail& r) -> std::optional<double> {
        const auto v = metric_of(r, "bandwidth_bytes_per_s");
        return v ? std::optional(*v / 1e9) : std::nullopt;
      });
    }
    auto memory = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "peak_cuda_allocated_bytes"); });
    if (!memory)
      memory = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "peak_cpu_alloc_bytes"); });
    const auto loss = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "loss_final"); });
    const auto accuracy = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "eval_accuracy"); });
    out << "<tr><td data-sort=\"" << g.id << "\"><a href=\"#trial-" << g.id << "\">trial " << g.id
        << "</a></td><td>" << esc(first.row.experiment) << "</td><td>" << esc(first.row.label)
        << "</td><td>" << to_string(first.row.kind) << "</td>"
        << num_cell(static_cast<double>(g.runs.size()), std::to_string(g.runs.size()))
        << num_cell(static_cast<double>(g.finished.size()), std::to_string(g.finished.size()))
        << num_cell(p50, p50 ? format_ns(*p50) : "-") << num_cell(p90, p90 ? format_ns(*p90) : "-")
        << num_cell(throughput, throughput ? format_number(*throughput) + " " + unit : "-")
        << num_cell(memory, memory ? format_number(*memory / 1e6) + " MB" : "-")
        << num_cell(loss, loss ? format_number(*loss) : "-")
        << num_cell(accuracy, accuracy ? format_number(*accuracy) : "-") << "</tr>\n";
  }
  out << "</tbody></table>\n<p class=\"note\">Median over each trial's finished runs of the run's "
         "median (p50) and p90 of its headline time (step_time for training, latency for inference, "
         "call_time for kernels), its throughput, its peak memory (CUDA allocated on a GPU, CPU "
         "allocations otherwise) and its final training loss. Click a column to sort.</p>\n";
  return out.str();
}

std::string runs_table(const ReportInput& in) {
  std::ostringstream out;
  out << "<table class=\"sortable\" id=\"runs\"><thead><tr><th>run</th><th>trial</th><th>sweep point</th>"
         "<th class=\"num\">repeat</th><th>status</th><th>started (UTC)</th>"
         "<th class=\"num\">median</th><th class=\"num\">samples</th><th>error</th></tr></thead><tbody>\n";
  for (const auto& run : in.runs) {
    const auto* s = summary_of(run, headline_metric(run.row.kind));
    out << "<tr><td data-sort=\"" << run.row.id << "\"><a href=\"#run-" << run.row.id << "\">run "
        << run.row.id << "</a></td><td data-sort=\"" << run.row.trial_id << "\">trial "
        << run.row.trial_id << "</td><td>" << esc(run.row.label) << "</td>"
        << num_cell(static_cast<double>(run.row.repeat_index), std::to_string(run.row.repeat_index))
        << "<td>" << status_badge(run.row.status) << "</td><td>" << esc(run.row.started_at)
        << "</td>" << num_cell(s ? std::optional(s->p50) : std::nullopt, s ? format_ns(s->p50) : "-")
        << num_cell(static_cast<double>(run.sample_count), std::to_string(run.sample_count))
        << "<td class=\"error\">" << esc(run.error) << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
  return out.str();
}

// --- sweep ---------------------------------------------------------------------

// The headline metric against each swept key: one point per trial (the median
// over its finished runs, with a bootstrap 95% interval), one line per value
// of the other swept keys.
std::string experiment_sweep_charts(Charts& charts, const std::string& experiment,
                                   const std::vector<const TrialGroup*>& trials);

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
      const auto [lo, hi] = median_interval(per_run);
      json point = {{"value", value},
                    {"median", store::median(per_run)},
                    {"lower", lo},
                    {"upper", hi},
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

// --- history -------------------------------------------------------------------

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
    json values = json::array();
    for (const HistoryPoint* p : points)
      values.push_back({{"run", "run " + std::to_string(p->run_id)},
                        {"started", p->started_at},
                        {"ms", p->headline_ns / 1e6},
                        {"build", p->build},
                        {"commit", p->commit}});
    json spec = {
        {"title", points.front()->title + ": " + points.front()->headline +
                      " p50 of every recorded run of this configuration"},
        {"width", 720},
        {"height", 200},
        {"data", {{"values", values}}},
        {"mark", {{"type", "point"}, {"filled", true}, {"size", 60}}},
        {"encoding",
         {{"x", {{"field", "started"}, {"type", "temporal"}, {"title", "started (UTC)"}}},
          {"y", {{"field", "ms"}, {"type", "quantitative"}, {"title", points.front()->headline + " (ms)"},
                 {"scale", {{"zero", false}}}}},
          {"color", {{"field", "build"}, {"type", "nominal"}, {"title", "plugin build"}}},
          {"tooltip", json::array({{{"field", "run"}}, {{"field", "started"}},
                                   {{"field", "ms"}, {"format", ".4f"}}, {{"field", "build"}},
                                   {{"field", "commit"}, {"title", "runner commit"}}})}}}};
    out << charts.add(std::move(spec));
  }
  return out.str();
}

// --- comparison ----------------------------------------------------------------

std::string verdict_class(const std::string& verdict) { return "verdict-" + verdict_word(verdict); }

std::string comparison_section(Charts& charts, const ReportInput& in) {
  std::ostringstream out;
  out << "<h2 id=\"comparison\">Comparison</h2>\n<p>A: <code>" << esc(in.sides->first)
      << "</code> &nbsp; B: <code>" << esc(in.sides->second) << "</code></p>\n";
  if (!in.comparison) {
    out << "<p class=\"warning\">" << esc(in.comparison_note) << "</p>\n";
    return out.str();
  }
  const SideComparison& c = *in.comparison;
  // The environment first: a difference there explains more than any statistic.
  out << "<h3>Environment</h3>\n";
  if (c.fingerprints_a > 1 || c.fingerprints_b > 1)
    out << "<p class=\"note\">A side spans several fingerprints; the first run's is diffed.</p>\n";
  if (c.diff.matters.empty()) {
    out << "<p>No fingerprint differences that matter for performance.</p>\n";
  } else {
    out << "<p class=\"warning\">The environments differ in ways that can change performance:</p>\n"
           "<table><thead><tr><th>fingerprint key</th><th>A</th><th>B</th></tr></thead><tbody>\n";
    for (const auto& d : c.diff.matters)
      out << "<tr><td><code>" << esc(d.key) << "</code></td><td>" << esc(d.a.value_or("(absent)"))
          << "</td><td>" << esc(d.b.value_or("(absent)")) << "</td></tr>\n";
    out << "</tbody></table>\n";
  }
  if (!c.diff.benign.empty()) {
    out << "<details><summary>" << c.diff.benign.size()
        << " benign difference(s) (hostname, commit, ...)</summary><table><tbody>\n";
    for (const auto& d : c.diff.benign)
      out << "<tr><td><code>" << esc(d.key) << "</code></td><td>" << esc(d.a.value_or("(absent)"))
          << "</td><td>" << esc(d.b.value_or("(absent)")) << "</td></tr>\n";
    out << "</tbody></table></details>\n";
  }
  if (c.schedule && c.schedule->separate_blocks)
    out << "<p class=\"warning\">A and B ran in separate blocks of time, not interleaved "
           "(interleaving "
        << fixed(c.schedule->interleaving, 2)
        << "): a drift of the machine between the blocks reads as an effect. Run the sides "
           "interleaved (one schedule: <code>runner run A.toml B.toml</code>).</p>\n";
  if (c.rows.empty()) {
    out << "<p>No metric is recorded on both sides.</p>\n";
    return out.str();
  }
  out << "<h3>Verdicts</h3>\n" << forest_plot(charts, c);
  out << "<table id=\"verdicts\"><thead><tr><th>metric</th><th class=\"num\">A median</th>"
         "<th class=\"num\">B median</th><th class=\"num\">B/A</th><th class=\"num\">95% CI</th>"
         "<th class=\"num\">p</th><th class=\"num\">runs A/B</th><th>verdict</th></tr></thead><tbody>\n";
  for (const MetricRow& row : c.rows) {
    const auto& r = row.result;
    const std::string verdict = verdict_text(row);
    out << "<tr><td>" << esc(row.spec.name) << "</td><td class=\"num\">"
        << esc(format_metric(r.median_a, row.spec.kind)) << "</td><td class=\"num\">"
        << esc(format_metric(r.median_b, row.spec.kind)) << "</td><td class=\"num\">"
        << fixed(r.ratio.ratio, 3) << "</td><td class=\"num\">[" << fixed(r.ratio.lower, 3) << ", "
        << fixed(r.ratio.upper, 3) << "]</td><td class=\"num\">" << fixed(r.test.p_value, 4)
        << "</td><td class=\"num\">" << r.n_a << "/" << r.n_b << "</td><td class=\""
        << verdict_class(verdict) << "\">" << esc(verdict) << "</td></tr>\n";
  }
  out << "</tbody></table>\n<p class=\"note\">Per-run medians over repetitions; Mann-Whitney U "
         "(two-sided) and a bootstrap CI of the ratio of medians; faster or slower only when p &lt; "
         "0.05 and the whole CI lies beyond the margin (each metric's run-to-run noise, at least "
      << format_number(store::kMinMarginPct) << "%), equivalent when it lies within it "
         "(docs/method.md).</p>\n";
  if (!c.rows.front().result.reliable)
    out << "<p class=\"warning\">" << esc(std::string(store::kUnreliableMessage)) << "</p>\n";
  return out.str();
}

// --- details -------------------------------------------------------------------

std::string key_value_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::ostringstream out;
  out << "<table class=\"kv\"><tbody>\n";
  for (const auto& [k, v] : rows)
    out << "<tr><td>" << esc(k) << "</td><td>" << esc(v) << "</td></tr>\n";
  out << "</tbody></table>\n";
  return out.str();
}

std::string file_url(const std::string& path) {
  std::string url = "file://";
  for (const unsigned char c : path) {
    if (std::isalnum(c) || std::string_view("/-_.~").find(static_cast<char>(c)) != std::string_view::npos) {
      url += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789ABCDEF";
      url += '%';
      url += hex[c >> 4];
      url += hex[c & 15];
    }
  }
  return url;
}

std::string ns_cell(std::int64_t ns) {
  const auto value = static_cast<double>(ns);
  return num_cell(value, format_ns(value));
}

std::string ops_table(const std::vector<store::OpStat>& ops) {
  std::vector<const store::OpStat*> sorted;
  for (const auto& op : ops) sorted.push_back(&op);
  std::sort(sorted.begin(), sorted.end(), [](const store::OpStat* a, const store::OpStat* b) {
    return a->self_cpu_ns + a->self_cuda_ns > b->self_cpu_ns + b->self_cuda_ns;
  });
  std::ostringstream out;
  out << "<table class=\"sortable\"><thead><tr><th>operator</th><th>input shapes</th>"
         "<th class=\"num\">calls</th><th class=\"num\">self CPU</th><th class=\"num\">total CPU</th>"
         "<th class=\"num\">self CUDA</th><th class=\"num\">total CUDA</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < sorted.size() && i < 25; ++i) {
    const store::OpStat& op = *sorted[i];
    out << "<tr><td><code>" << esc(op.name) << "</code></td><td>" << esc(op.input_shapes) << "</td>"
        << num_cell(static_cast<double>(op.calls), std::to_string(op.calls))
        << ns_cell(op.self_cpu_ns) << ns_cell(op.total_cpu_ns) << ns_cell(op.self_cuda_ns)
        << ns_cell(op.total_cuda_ns) << "</tr>\n";
  }
  out << "</tbody></table>\n";
  return out.str();
}

std::string run_details(const ReportInput& in, const store::RunDetail& run) {
  std::ostringstream out;
  out << "<details id=\"run-" << run.row.id << "\"><summary>run " << run.row.id << " &middot; "
      << status_badge(run.row.status) << " &middot; repeat " << run.row.repeat_index
      << " &middot; started " << esc(run.row.started_at) << "</summary>\n";
  std::vector<std::pair<std::string, std::string>> facts = {
      {"uuid", run.uuid}, {"seed", std::to_string(run.seed)},
      {"load average at start", format_number(run.load_average)},
      {"finished", run.row.finished_at}, {"fingerprint", run.fingerprint_hash}};
  if (!run.error.empty()) facts.emplace_back("error", run.error);
  out << key_value_table(facts);
  if (!run.plugins.empty()) {
    out << "<h3>Plugins</h3><table><thead><tr><th>kind</th><th>name</th><th>version</th>"
           "<th>library</th><th>sha256</th></tr></thead><tbody>\n";
    for (const auto& p : run.plugins)
      out << "<tr><td>" << esc(p.kind) << "</td><td>" << esc(p.name) << "</td><td>" << esc(p.version)
          << "</td><td><code>" << esc(p.library) << "</code></td><td><code>" << esc(p.sha256)
          << "</code></td></tr>\n";
    out << "</tbody></table>\n";
  }
  for (const auto& f : run.files) {
    if (f.role != "profile_trace") continue;
    out << "<h3>Profiler trace</h3><p><a href=\"" << esc(file_url(f.path)) << "\">" << esc(f.path)
        << "</a> (" << format_number(static_cast<double>(f.bytes) / 1e6)
        << " MB, Chrome trace JSON): open it in <code>https://ui.perfetto.dev</code> (Open trace "
           "file) or <code>chrome://tracing</code> (Load).</p>\n";
  }
  if (const auto it = in.ops.find(run.row.id); it != in.ops.end() && !it->second.empty())
    out << "<h3>Top operators of the profiled steps</h3>\n" << ops_table(it->second);
  if (!run.attributes.empty()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& a : run.attributes) rows.emplace_back(a.name, a.value);
    out << "<h3>Attributes</h3>\n" << key_value_table(rows);
  }
  if (!run.files.empty()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& f : run.files) rows.emplace_back(f.role, f.path + "  (sha256 " + f.sha256.substr(0, 16) + "...)");
    out << "<h3>Files</h3>\n" << key_value_table(rows);
  }
  if (!run.fingerprint_json.empty()) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& [k, v] : parse_json_object(run.fingerprint_json)) rows.emplace_back(k, v);
    out << "<details><summary>Environment fingerprint (" << rows.size() << " keys)</summary>\n"
        << key_value_table(rows) << "</details>\n";
  }
  out << "</details>\n";
  return out.str();
}

std::string trial_details(const ReportInput& in, const TrialGroup& g) {
  const store::RunDetail& first = *g.runs.front();
  std::ostringstream out;
  out << "<h3 id=\"trial-" << g.id << "\">" << esc(trial_title(first)) << "</h3>\n"
      << "<p class=\"note\">config hash <code>" << esc(first.config_hash.substr(0, 16))
      << "</code>, identity <code>" << esc(first.identity.substr(0, 16)) << "</code></p>\n"
      << "<details><summary>Configuration (TOML)</summary><pre>" << esc(config_toml(first.config_json))
      << "</pre></details>\n";
  for (const auto* run : g.runs) out << run_details(in, *run);
  return out.str();
}

}  // namespace

std::pair<double, double> median_interval(const std::vector<double>& values) {
  if (values.empty()) return {0, 0};
  const double m = store::median(values);
  if (values.size() < 2) return {m, m};
  std::mt19937_64 generator(store::kDefaultBootstrapSeed);
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  constexpr int resamples = 2000;
  std::vector<double> medians;
  medians.reserve(resamples);
  std::vector<double> draw(values.size());
  for (int i = 0; i < resamples; ++i) {
    for (auto& d : draw) d = values[pick(generator)];
    medians.push_back(store::median(draw));
  }
  std::sort(medians.begin(), medians.end());
  return {quantile(medians, 0.025), quantile(medians, 0.975)};
}

std::string render_report(const ReportInput& in) {
  Charts charts;
  const std::vector<TrialGroup> trials = trials_of(in);
  std::map<std::string, int> statuses;
  for (const auto& run : in.runs) ++statuses[to_string(run.row.status)];
  std::string counts;
  for (const auto& [status, n] : statuses)
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + status;

  std::ostringstream body;
  body << "<h1>runner report</h1>\n<p class=\"lead\"><code>" << esc(in.selectors) << "</code> in <code>"
       << esc(in.database) << "</code>: " << in.runs.size() << " run(s) (" << esc(counts) << ") of "
       << trials.size() << " trial(s); generated " << esc(in.generated_at) << "</p>\n"
       << "<nav>" << (in.sides ? "<a href=\"#comparison\">comparison</a>" : "")
       << "<a href=\"#summary\">summary</a><a href=\"#runs-section\">runs</a><a href=\"#sweep\">sweep</a>"
          "<a href=\"#distributions\">step times</a><a href=\"#loss\">loss</a>"
          "<a href=\"#history\">history</a><a href=\"#details\">configuration and environment</a></nav>\n"
       << "<div id=\"report-problems\" hidden><strong>This page raised problems while drawing:</strong>"
          "<ul></ul></div>\n";
  if (in.sides) body << comparison_section(charts, in);
  body << "<h2 id=\"summary\">Summary per trial</h2>\n" << summary_table(in, trials);
  body << "<h2 id=\"runs-section\">Runs</h2>\n" << runs_table(in);
  const std::string sweep = sweep_charts(charts, trials);
  body << "<h2 id=\"sweep\">Sweep</h2>\n"
       << (sweep.empty() ? "<p class=\"note\">No swept key takes two values among these trials' "
                           "finished runs.</p>\n"
                         : sweep);
  body << "<h2 id=\"distributions\">Step time distributions</h2>\n" << phase_boxes(charts, in);
  const std::string loss = loss_lines(charts, in), evaluation = evaluation_lines(charts, in);
  body << "<h2 id=\"loss\">Loss and evaluation</h2>\n"
       << (loss.empty() && evaluation.empty() ? "<p class=\"note\">No loss recorded (inference or "
                                                "kernel runs).</p>\n"
                                              : loss + evaluation);
  const std::string history = history_charts(charts, in);
  body << "<h2 id=\"history\">History</h2>\n<p class=\"note\">Every finished run in the database "
          "with the same configuration as a selected trial, over time, coloured by the plugin "
          "libraries it ran (a rebuilt plugin is a new trial identity with the same "
          "configuration), as asv tracks a benchmark across commits.</p>\n"
       << (history.empty() ? "<p class=\"note\">No finished runs.</p>\n" : history);
  body << "<h2 id=\"details\">Configuration and environment</h2>\n";
  for (const TrialGroup& g : trials) body << trial_details(in, g);

  std::ostringstream page;
  page << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<title>runner report: "
       << esc(in.selectors) << "</title>\n<style>\n" << assets::page_style << "</style>\n<script>\n"
       << assets::page_script << "</script>\n<script>\n" << assets::vega << "\n</script>\n<script>\n"
       << assets::vega_lite << "\n</script>\n<script>\n" << assets::vega_embed << "\n</script>\n"
       << "</head>\n<body>\n" << body.str() << "<footer>Made by runner " << esc(in.generated_at)
       << "; charts drawn by " << esc(assets::library_versions) << " (inlined). " << charts.count()
       << " chart(s).</footer>\n</body>\n</html>\n";
  return page.str();
}

}  // namespace runner::cli
