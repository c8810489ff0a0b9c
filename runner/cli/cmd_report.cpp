// runner report SELECTOR... [--out report.html]: one self-contained HTML page
// of what the store holds about the selected runs (docs/report.md).
#include <ctime>
#include <iostream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "comparison.hpp"
#include "report_html.hpp"
#include "runner/common/error.hpp"
#include "runner/common/files.hpp"
#include "runner/common/json.hpp"
#include "runner/common/output_path.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/store.hpp"
#include "selection.hpp"
#include "table.hpp"

namespace runner::cli {
namespace {

using nlohmann::json;

// At most this many points per configuration in the history view, the most
// recent ones.
constexpr std::size_t kHistoryPoints = 500;

std::string now_iso() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// "mlp 0.1.0 (1a2b3c4d), sgd 0.1.0 (5e6f7a8b)": what distinguishes builds.
std::string build_of(const store::RunDetail& run) {
  std::vector<std::string> parts;
  for (const auto& p : run.plugins)
    parts.push_back(p.name + " " + p.version + " (" + p.sha256.substr(0, 8) + ")");
  return parts.empty() ? std::string("(no plugins)") : join(parts, ", ");
}

std::vector<HistoryPoint> history_of(const store::Store& db,
                                     const std::vector<store::RunDetail>& runs) {
  std::vector<HistoryPoint> out;
  std::set<std::string> done;
  for (const auto& selected : runs) {
    if (!done.insert(selected.config_hash).second) continue;
    std::vector<HistoryPoint> points;
    std::set<std::int64_t> seen;
    for (const auto& [identity, environment] : db.environments_of_config(selected.config_hash)) {
      (void)environment;
      for (const store::TrialRun& r : db.runs_of_identity(identity)) {
        if (r.status != store::RunStatus::finished || !seen.insert(r.run_id).second) continue;
        const auto run = db.get_run(r.run_id);
        if (!run) continue;
        const std::string headline = headline_metric(run->row.kind);
        for (const auto& s : run->summaries) {
          if (s.metric != headline || s.n == 0) continue;
          HistoryPoint p;
          p.config_hash = selected.config_hash;
          p.title = selected.row.experiment +
                    (selected.row.label.empty() ? "" : " (" + selected.row.label + ")");
          p.run_id = run->row.id;
          p.started_at = run->row.started_at;
          p.headline_ns = s.p50;
          p.headline = headline;
          p.build = build_of(*run);
          const auto fingerprint = parse_json_object(run->fingerprint_json);
          if (const auto it = fingerprint.find("software.git_commit"); it != fingerprint.end())
            p.commit = it->second.substr(0, 10);
          if (const auto it = run->labels.find("commit"); it != run->labels.end()) p.axis_label = it->second;
          points.push_back(std::move(p));
        }
      }
    }
    std::sort(points.begin(), points.end(), [](const HistoryPoint& a, const HistoryPoint& b) {
      return a.started_at < b.started_at;
    });
    if (points.size() > kHistoryPoints)
      points.erase(points.begin(), points.end() - static_cast<std::ptrdiff_t>(kHistoryPoints));
    for (auto& p : points) out.push_back(std::move(p));
  }
  return out;
}

// Every configuration key of a side's trials with the values it takes, keys
// dotted as --set and --by take them: "train.steps", "model.hidden" (a plugin
// option), "experiment.seed" (a top-level key).
std::map<std::string, std::set<std::string>> config_values(const Side& side) {
  std::map<std::string, std::set<std::string>> out;
  std::set<std::string> seen;
  for (const auto& run : side.runs) {
    if (!seen.insert(run.config_json).second) continue;
    const json config = parse_json(run.config_json);
    if (!config.is_object()) continue;
    for (const auto& [section, value] : config.items()) {
      if (!value.is_object()) {
        out["experiment." + section].insert(render(value));
        continue;
      }
      for (const auto& [key, item] : value.items()) {
        if (key == "options" && item.is_object()) {
          for (const auto& [option, setting] : item.items())
            out[section + "." + option].insert(render(setting));
        } else {
          out[section + "." + key].insert(render(item));
        }
      }
    }
  }
  return out;
}

// The keys whose values differ between the sides, but the compared one: a
// comparison of trials that differ in more than one key cannot say which
// difference made the effect.
std::vector<ConfigDifference> config_differences(const Side& a, const Side& b,
                                                 const std::string& compared_key) {
  const auto va = config_values(a), vb = config_values(b);
  std::set<std::string> keys;
  for (const auto* values : {&va, &vb})
    for (const auto& [key, set] : *values) keys.insert(key);
  const auto shown = [](const std::map<std::string, std::set<std::string>>& values,
                        const std::string& key) {
    const auto it = values.find(key);
    if (it == values.end()) return std::string("(absent)");
    return join(std::vector<std::string>(it->second.begin(), it->second.end()), ", ");
  };
  std::vector<ConfigDifference> out;
  for (const std::string& key : keys) {
    if (key == compared_key) continue;
    std::string in_a = shown(va, key), in_b = shown(vb, key);
    if (in_a != in_b) out.push_back({key, std::move(in_a), std::move(in_b)});
  }
  return out;
}

void compare_into(ReportInput& in, const Side& a, const Side& b, std::optional<double> margin,
                  const std::string& compared_key) {
  in.sides = {a.name, b.name};
  in.compared_key = compared_key;
  for (const Side* side : {&a, &b})
    if (side->runs.empty()) {
      in.comparison_note = "Side " + side->name + " has no finished runs: nothing to compare.";
      return;
    }
  in.config_differences = config_differences(a, b, compared_key);
  in.comparison = compare_sides(a, b, margin);
}

int handle_report(const Args& args, const Global& global) {
  const std::string by = by_option(args);
  const std::optional<double> margin = margin_option(args);
  const std::filesystem::path out = args.get("--out", "report.html");
  // Before any work: a report that cannot be written, or whose path is not
  // runner's to replace, is not made (output_path.hpp).
  OutputUse use;
  use.option = "--out";
  use.example = "report.html";
  const bool to_file = check_output(out, use) == OutputTarget::file;
  const store::Store db = store::Store::open_read_only(global.db);

  ReportInput in;
  in.selectors = join(args.positionals, " ") + (by.empty() ? "" : " --by " + by);
  for (const char* option : {"--baseline", "--versus"})
    if (args.has(option)) in.selectors += std::string(" ") + option + " " + args.get(option);
  if (auto it = args.values.find("--where"); it != args.values.end())
    for (const std::string& w : it->second) in.selectors += " --where " + w;
  in.database = global.db.string();
  in.generated_at = now_iso();
  in.runs = select_all(db, args.positionals, RunFilter::all).runs;
  if (!by.empty()) {
    const auto [a, b] = split_by(db, args);
    compare_into(in, a, b, margin, by);
  } else if (args.positionals.size() == 2) {
    compare_into(in, select(db, args.positionals[0]), select(db, args.positionals[1]), margin, "");
  }
  for (const auto& run : in.runs) {
    in.samples[run.row.id] = db.samples(run.row.id);
    if (auto ops = db.run_ops(run.row.id); !ops.empty()) in.ops[run.row.id] = std::move(ops);
  }
  in.history = history_of(db, in.runs);
  in.claims = judge_claims(db, in.runs);

  const std::string page = render_report(in);
  if (!to_file) {
    std::cout << page;
    std::cout.flush();
    if (!std::cout) throw Error("cannot write the report to standard output", {}, ErrorKind::run);
    return kExitOk;
  }
  write_file_atomically(out, page);
  std::cout << "wrote " << out.string() << " (" << format_number(static_cast<double>(page.size()) / 1e6)
            << " MB): " << in.runs.size() << " run(s)"
            << (in.comparison ? ", a comparison" : "") << "; open it in a browser (works offline)\n";
  return kExitOk;
}

}  // namespace

Command report_command() {
  CommandDef def;
  def.name = "report";
  def.summary = "write one self-contained HTML report with charts of recorded runs";
  def.usage = "runner report SELECTOR... [--out report.html] [options]";
  def.positionals = {"SELECTOR"};
  def.variadic = true;
  def.options = {
      {"--out", "FILE",
       "where to write the page (default report.html): a new path or a regular file, replaced "
       "whole; - for standard output",
       false}};
  for (OptionDef& option : side_options()) def.options.push_back(std::move(option));
  def.details =
      "SELECTOR is RUN_ID, run:ID[,ID...], trial:ID[,ID...], experiment:NAME or\n"
      "label:KEY=VALUE, as for compare;\n"
      "every selected run is shown, failed and interrupted ones included. Two selectors (or\n"
      "--by) add a comparison of their finished runs: the fingerprint diff, the ratio per\n"
      "metric with its confidence interval as a forest plot, and the verdicts. The page holds\n"
      "its chart library (Vega-Lite) and loads nothing when opened. See docs/report.md.";
  return {def, &handle_report};
}

}  // namespace runner::cli
