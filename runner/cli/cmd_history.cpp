// runner history SELECTOR...: each configuration's runs along an axis (a run
// label such as the commit, the time, a fingerprint key), one point per axis
// value, and where the series changed level, with how much and how sure
// (docs/method.md, "Change points"). --fail-on regression gates CI on it.
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "history_series.hpp"
#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/store.hpp"
#include "selection.hpp"
#include "table.hpp"

namespace runner::cli {
namespace {

// Series with more points than this list them in JSON and CSV only.
constexpr std::size_t kTablePoints = 60;

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// "slower", "faster": what a change means for this metric.
std::string change_word(const HistorySeries& s, const store::ChangePoint& c) {
  const bool up = c.ratio.ratio > 1;
  const bool worse = s.metric.direction == store::Direction::lower_is_better ? up : !up;
  if (s.metric.kind == MetricKind::memory) return up ? "larger" : "smaller";
  return worse ? "slower" : "faster";
}

std::string interval(const store::ChangePoint& c) {
  return "[" + fixed(c.ratio.lower, 3) + ", " + fixed(c.ratio.upper, 3) + "]";
}

std::string p_text(double p) { return p < 0.001 ? "<0.001" : fixed(p, 3); }

// The --fail-on threshold in percent, nullopt without the option.
std::optional<double> fail_on(const Args& args) {
  if (!args.has("--fail-on")) return std::nullopt;
  const std::string text = args.get("--fail-on");
  const std::string bad = "--fail-on must be regression or regression:PCT (PCT a percentage >= 0), found '" +
                          text + "'";
  if (text == "regression") return 0.0;
  if (text.rfind("regression:", 0) != 0) throw Error(bad);
  std::string pct = text.substr(11);
  if (!pct.empty() && pct.back() == '%') pct.pop_back();
  const std::optional<double> value = parse_double(pct);
  if (!value || !(*value >= 0) || *value >= 100) throw Error(bad);
  return *value;
}

void print_table(const std::vector<HistorySeries>& all, const HistoryAxis& axis) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    const HistorySeries& s = all[i];
    std::size_t runs = 0;
    for (const SeriesPoint& p : s.points) runs += p.values.size();
    std::vector<std::string> trials;
    for (const auto t : s.trials) trials.push_back(std::to_string(t));
    std::cout << (i ? "\n" : "") << "== " << terminal_safe(s.name) << " (trial:" << join(trials, ",")
              << "): " << s.metric.name << " along " << terminal_safe(axis.text) << ", "
              << s.points.size() << " point(s), " << runs << " run(s)\n";
    if (s.without_axis > 0)
      std::cout << "note: " << s.without_axis << " run(s) without a value on " << terminal_safe(axis.text)
                << " left out\n";
    if (s.not_ordered > 0)
      std::cout << "note: " << s.not_ordered << " run(s) whose value --order does not name left out\n";
    if (s.points.size() <= kTablePoints) {
      Table points({"#", axis.kind == HistoryAxis::Kind::time ? "started" : "at", "runs", "median", ""});
      std::size_t next = 0;
      for (std::size_t k = 0; k < s.points.size(); ++k) {
        std::string mark;
        if (next < s.changes.size() && s.changes[next].index == k)
          mark = "<- " + change_word(s, s.changes[next++]);
        points.add({std::to_string(k), s.points[k].at, std::to_string(s.points[k].values.size()),
                    format_metric(s.points[k].median, s.metric.kind), mark});
      }
      points.print(std::cout);
    } else {
      std::cout << "(" << s.points.size() << " points: --format json or csv lists them)\n";
    }
    if (s.changes.empty()) {
      std::cout << "no change points\n";
      continue;
    }
    std::cout << "change points:\n";
    Table changes({"at", "before", "after", "after/before", "95% CI", "p", ""});
    for (const store::ChangePoint& c : s.changes)
      changes.add({s.points[c.index].at, format_metric(c.before, s.metric.kind),
                   format_metric(c.after, s.metric.kind), fixed(c.ratio.ratio, 3), interval(c),
                   p_text(c.p_value), change_word(s, c)});
    changes.print(std::cout);
  }
  std::cout << "\nE-Divisive means on ranks with a permutation test; a change point is kept when "
               "p < 0.05 and the bootstrap CI of after/before (segment medians) excludes 1\n";
}

void print_json(const std::vector<HistorySeries>& all, const HistoryAxis& axis,
                const std::vector<bool>& regressed, bool gate) {
  std::cout << "{\"along\":" << json_quote(axis.text) << ",\"series\":[";
  for (std::size_t i = 0; i < all.size(); ++i) {
    const HistorySeries& s = all[i];
    std::cout << (i ? "," : "") << "{\"configuration\":" << json_quote(s.name)
              << ",\"config_hash\":" << json_quote(s.config_hash) << ",\"trials\":[";
    for (std::size_t t = 0; t < s.trials.size(); ++t) std::cout << (t ? "," : "") << s.trials[t];
    std::cout << "],\"metric\":" << json_quote(s.metric.name) << ",\"lower_is_better\":"
              << (s.metric.direction == store::Direction::lower_is_better ? "true" : "false")
              << ",\"points\":[";
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      const SeriesPoint& p = s.points[k];
      std::cout << (k ? "," : "") << "{\"at\":" << json_quote(p.at) << ",\"median\":" << number(p.median)
                << ",\"runs\":[";
      for (std::size_t r = 0; r < p.runs.size(); ++r) std::cout << (r ? "," : "") << p.runs[r];
      std::cout << "],\"values\":[";
      for (std::size_t r = 0; r < p.values.size(); ++r) std::cout << (r ? "," : "") << number(p.values[r]);
      std::cout << "]}";
    }
    std::cout << "],\"change_points\":[";
    for (std::size_t k = 0; k < s.changes.size(); ++k) {
      const store::ChangePoint& c = s.changes[k];
      std::cout << (k ? "," : "") << "{\"at\":" << json_quote(s.points[c.index].at)
                << ",\"index\":" << c.index << ",\"before\":" << number(c.before)
                << ",\"after\":" << number(c.after) << ",\"ratio\":" << number(c.ratio.ratio)
                << ",\"ci\":[" << number(c.ratio.lower) << "," << number(c.ratio.upper)
                << "],\"p\":" << number(c.p_value) << ",\"runs_before\":" << c.runs_before
                << ",\"runs_after\":" << c.runs_after << ",\"change\":" << json_quote(change_word(s, c))
                << "}";
    }
    std::cout << "],\"left_out\":" << s.without_axis + s.not_ordered
              << ",\"regression\":" << (regressed[i] ? "true" : "false") << "}";
  }
  std::cout << "],\"regression\":" << (gate ? "true" : "false") << "}\n";
}

void print_csv(const std::vector<HistorySeries>& all) {
  std::cout << "configuration,config_hash,metric,index,at,runs,median,change,before,after,ratio,ci_lower,"
               "ci_upper,p\n";
  for (const HistorySeries& s : all) {
    std::size_t next = 0;
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      const SeriesPoint& p = s.points[k];
      std::cout << csv_field(s.name) << "," << s.config_hash << "," << s.metric.name << "," << k << ","
                << csv_field(p.at) << "," << p.values.size() << "," << number(p.median) << ",";
      if (next < s.changes.size() && s.changes[next].index == k) {
        const store::ChangePoint& c = s.changes[next++];
        std::cout << change_word(s, c) << "," << number(c.before) << "," << number(c.after) << ","
                  << number(c.ratio.ratio) << "," << number(c.ratio.lower) << ","
                  << number(c.ratio.upper) << "," << number(c.p_value) << "\n";
      } else {
        std::cout << ",,,,,,\n";
      }
    }
  }
}

std::vector<std::string> order_option(const Args& args) {
  if (!args.has("--order")) return {};
  std::vector<std::string> order;
  for (const std::string& v : split(args.get("--order"), ','))
    if (!v.empty()) order.push_back(v);
  if (order.empty())
    throw Error("--order needs the axis values in order, e.g. --order v1,v2,v3");
  return order;
}

int handle_history(const Args& args, const Global& global) {
  const std::string format = args.get("--format", "table");
  if (format != "table" && format != "json" && format != "csv")
    throw Error("--format must be table, json or csv, found '" + format + "'");
  HistoryRequest request;
  if (args.has("--metric")) request.metric = args.get("--metric");
  request.axis = parse_axis(args.get("--along", "time"));
  request.order = order_option(args);
  if (!request.order.empty() && request.axis.kind == HistoryAxis::Kind::time)
    throw Error("--order orders the values of a label or fingerprint axis, not time",
                "e.g. --along label:commit --order abc123,def456");
  const std::optional<double> gate_pct = fail_on(args);
  const store::Store db = store::Store::open_read_only(global.db);
  const Side selected = select_all(db, args.positionals, RunFilter::finished, RunRead::brief);
  const std::vector<HistorySeries> series = build_history(selected.runs, request);

  std::vector<bool> regressed(series.size(), false);
  bool gate = false;
  if (gate_pct)
    for (std::size_t i = 0; i < series.size(); ++i) gate = (regressed[i] = last_change_regresses(series[i], *gate_pct)) || gate;

  if (format == "json") print_json(series, request.axis, regressed, gate);
  else if (format == "csv") print_csv(series);
  else print_table(series, request.axis);

  if (!gate_pct) return kExitOk;
  for (std::size_t i = 0; i < series.size(); ++i) {
    if (!regressed[i]) continue;
    const HistorySeries& s = series[i];
    const store::ChangePoint& c = s.changes.back();
    std::cerr << "REGRESSION: " << terminal_safe(s.name) << ": " << s.metric.name << " "
              << fixed(c.ratio.ratio, 3) << "x (" << change_word(s, c) << ", 95% CI " << interval(c)
              << ", p = " << p_text(c.p_value) << ") from " << terminal_safe(request.axis.text) << "="
              << terminal_safe(s.points[c.index].at) << " on: " << format_metric(c.before, s.metric.kind)
              << " -> " << format_metric(c.after, s.metric.kind) << "\n";
  }
  if (!gate && format == "table")
    std::cout << "gate passed: no series ends in a "
              << (*gate_pct > 0 ? "slowdown beyond " + format_number(*gate_pct) + "%" : std::string("significant slowdown"))
              << "\n";
  return gate ? kExitRunFailed : kExitOk;
}

}  // namespace

Command history_command() {
  CommandDef def;
  def.name = "history";
  def.summary = "each configuration's runs along the commits (or time), and where they changed level";
  def.usage = "runner history SELECTOR... [options]";
  def.positionals = {"SELECTOR"};
  def.variadic = true;
  def.options = {
      {"--metric", "M", "the metric (default: step_time, or latency for inference)", false},
      {"--along", "AXIS", "time (default), label:KEY or a fingerprint key (software.torch_version)", false},
      {"--order", "V1,V2,...", "the axis values in this order (default: as they first appear)", false},
      {"--format", "FORMAT", "table (default), json or csv", false},
      {"--fail-on", "regression[:PCT]",
       "exit 1 when a series' last change point is a slowdown (beyond PCT %)", false}};
  def.details =
      "SELECTOR is RUN_ID, run:ID[,ID...], trial:ID[,ID...], experiment:NAME or label:KEY=VALUE;\n"
      "only finished runs count. A series is one configuration (its resolved settings; runs\n"
      "of other builds and environments included) and each point the runs that share one\n"
      "value of the axis: with --along label:commit, a commit's repetitions. With --along\n"
      "time each run is its own point.\n"
      "\n"
      "Change points: E-Divisive means on the ranks of the runs' values with a permutation\n"
      "test (docs/method.md, \"Change points\"); one is kept when p < 0.05 and the bootstrap\n"
      "interval of after/before (the medians of the segments) excludes 1. A level needs 3\n"
      "runs, so a change at the last point is found when it holds 3 repetitions or more.\n"
      "\n"
      "--fail-on regression exits 1 when the last change point of any series is a\n"
      "slowdown (a time up, a throughput down) whose whole interval lies beyond PCT %\n"
      "(default 0: any significant one), naming the configuration and the axis value\n"
      "where it starts.";
  return {def, &handle_history};
}

}  // namespace runner::cli
