// The claims section of `runner report` (docs/report.md): each [[expect]] of
// the selected runs' experiments, judged as `runner check` judges it, its
// ratio and interval drawn against the claimed bound.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "report_parts.hpp"
#include "runner/common/json.hpp"
#include "runner/scheduler/judge.hpp"
#include "table.hpp"

namespace runner::cli {

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The stored file's expectations: read from where it was run when that file
// still holds the recorded text (so `extends` resolves), else from the text
// itself in a scratch file.
std::vector<Expectation> stored_expectations(const store::StoredSource& source) {
  std::error_code ec;
  if (!source.path.empty() && fs::is_regular_file(source.path, ec) && slurp(source.path) == source.text)
    return file_expectations(*parse_experiment_file(source.path));
  const fs::path dir = fs::temp_directory_path() / ("runner-report-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / (fs::path(source.path).filename().empty() ? fs::path("experiment.toml")
                                                                          : fs::path(source.path).filename());
  std::ofstream(file, std::ios::binary) << source.text;
  try {
    auto out = file_expectations(*parse_experiment_file(file));
    fs::remove_all(dir, ec);
    return out;
  } catch (...) {
    fs::remove_all(dir, ec);
    throw;
  }
}

bool matches(const nlohmann::json& config, const std::string& label, const std::string& key,
             const std::string& value) {
  return same_value(trial_value(config, label, key), value);
}

}  // namespace

std::vector<ClaimRow> judge_claims(const store::Store& db, const std::vector<store::RunDetail>& runs) {
  std::vector<std::string> names;
  for (const auto& run : runs)
    if (std::find(names.begin(), names.end(), run.row.experiment) == names.end())
      names.push_back(run.row.experiment);
  std::vector<ClaimRow> out;
  for (const std::string& name : names) {
    std::vector<Expectation> expectations;
    for (const store::StoredSource& source : db.experiment_sources(name)) {
      if (source.text.find("[[expect]]") == std::string::npos) continue;
      try {
        expectations = stored_expectations(source);
      } catch (const Error& e) {
        ClaimRow row;
        row.experiment = name;
        row.note = std::string("its [[expect]] tables could not be read: ") + e.what();
        out.push_back(std::move(row));
      }
      break;  // the newest file that states claims
    }
    const std::vector<store::TrialInfo> trials = db.trials_of_experiment(name);
    for (const Expectation& e : expectations) {
      ClaimRow row;
      row.experiment = name;
      row.expectation = e;
      std::vector<double> a, b;
      std::set<std::int64_t> seen;
      for (const store::TrialInfo& trial : trials) {
        const nlohmann::json config = parse_json(trial.config_json);
        if (!std::all_of(e.where.begin(), e.where.end(), [&](const auto& w) {
              return matches(config, trial.label, w.first, w.second);
            }))
          continue;
        std::vector<double>* side = matches(config, trial.label, e.by, e.baseline) ? &a
                                    : matches(config, trial.label, e.by, e.versus) ? &b
                                                                                  : nullptr;
        if (side == nullptr) continue;
        for (const store::TrialRun& r : db.runs_of_trial(trial.id)) {
          if (r.status != store::RunStatus::finished || !seen.insert(r.run_id).second) continue;
          if (const auto run = db.get_run(r.run_id)) {
            const std::size_t before = side->size();
            add_run_values(*run, e.metric, *side);
            side->resize(std::min(side->size(), before + 1));
          }
        }
      }
      row.result = store::judge_expectation(a, b, expected_bound(e));
      out.push_back(std::move(row));
    }
  }
  return out;
}

namespace report {

std::string claims_section(Charts& charts, const ReportInput& in) {
  static const std::vector<std::pair<std::string, std::string>> palette = {
      {"holds", "#1a7f37"}, {"refuted", "#cf222e"}, {"undecided", "#d4821f"}};
  json rows = json::array(), edges = json::array(), order = json::array();
  std::ostringstream table;
  table << "<table class=\"sortable\"><thead><tr><th>#</th><th>verdict</th><th>claim</th>"
           "<th>source</th><th>metric: B / A</th><th>B/A</th><th>95% CI</th><th>claimed</th>"
           "<th>runs A/B</th><th>note</th></tr></thead><tbody>\n";
  std::ostringstream notes;
  int number = 0;
  for (const ClaimRow& c : in.claims) {
    if (!c.note.empty()) {
      notes << "<p class=\"note\">" << esc(c.experiment) << ": " << esc(c.note) << "</p>\n";
      continue;
    }
    ++number;
    const Expectation& e = c.expectation;
    const store::ExpectationResult& r = c.result;
    const std::string verdict(store::expectation_verdict_name(r.verdict));
    const std::string label = "#" + std::to_string(number) + " " + e.claim;
    const bool values = r.n_a > 0 && r.n_b > 0;
    std::string claimed;
    switch (e.bound) {
      case ExpectBound::ratio_below:
        claimed = "< " + format_number(e.value);
        edges.push_back({{"claim", label}, {"edge", e.value}});
        break;
      case ExpectBound::ratio_above:
        claimed = "> " + format_number(e.value);
        edges.push_back({{"claim", label}, {"edge", e.value}});
        break;
      case ExpectBound::equivalent_within:
        claimed = "within +/-" + format_number(100 * e.value) + " %";
        if (e.value < 1) edges.push_back({{"claim", label}, {"edge", 1 - e.value}});
        edges.push_back({{"claim", label}, {"edge", 1 + e.value}});
        break;
    }
    order.push_back(label);
    if (values)
      rows.push_back({{"claim", label},
                      {"ratio", r.ratio.ratio},
                      {"lower", r.ratio.lower},
                      {"upper", r.ratio.upper},
                      {"verdict", verdict},
                      {"claimed", claimed},
                      {"runs", std::to_string(r.n_a) + "/" + std::to_string(r.n_b)}});
    std::string note = r.verdict == store::ExpectationVerdict::undecided ? r.reason : "";
    if (r.more_runs) note += "; about " + std::to_string(*r.more_runs) + " more run(s) a side would likely decide it";
    table << "<tr><td>" << number << "</td><td><span class=\"verdict verdict-" << verdict << "\">"
          << verdict << "</span></td><td>" << esc(e.claim) << "</td><td>" << esc(e.source)
          << "</td><td>" << esc(e.metric + ": " + e.by + " " + bare_value(e.versus) + " / " +
                                bare_value(e.baseline))
          << "</td>" << num_cell(values ? std::optional<double>(r.ratio.ratio) : std::nullopt,
                                 values ? fixed(r.ratio.ratio, 3) : "-")
          << "<td>" << (values ? "[" + fixed(r.ratio.lower, 3) + ", " + fixed(r.ratio.upper, 3) + "]" : "-")
          << "</td><td>" << esc(claimed) << "</td><td>" << r.n_a << "/" << r.n_b << "</td><td>"
          << esc(note) << "</td></tr>\n";
  }
  table << "</tbody></table>\n";
  std::ostringstream out;
  out << "<h2 id=\"claims\">Claims</h2>\n<p class=\"note\">Each <code>[[expect]]</code> of these "
         "experiments, judged as <code>runner check</code> judges it: the ratio B / A of the "
         "metric's per-run values with its 95% interval (dots and lines), against the claimed "
         "bound (red ticks). holds: the whole interval satisfies the bound; refuted: it wholly "
         "violates it; undecided: neither.</p>\n"
      << notes.str();
  if (number == 0) return out.str();
  json domain = json::array(), range = json::array();
  for (const auto& [verdict, colour] : palette) {
    domain.push_back(verdict);
    range.push_back(colour);
  }
  const json y = {{"field", "claim"}, {"type", "nominal"}, {"scale", {{"domain", order}}},
                  {"title", nullptr}, {"axis", {{"labelLimit", 360}}}};
  const json x_scale = {{"type", "log"}, {"zero", false}};
  json spec = {
      {"title", "B / A per claim (95% CI) against the claimed bound"},
      {"width", 520},
      {"height", {{"step", 28}}},
      {"layer",
       json::array(
           {{{"data", {{"values", json::array({{{"one", 1}}})}}},
             {"mark", {{"type", "rule"}, {"color", "#8c959f"}, {"strokeDash", {2, 2}}}},
             {"encoding", {{"x", {{"field", "one"}, {"type", "quantitative"}, {"scale", x_scale}}}}}},
            {{"data", {{"values", edges}}},
             {"mark", {{"type", "tick"}, {"color", "#cf222e"}, {"thickness", 3}}},
             {"encoding",
              {{"x", {{"field", "edge"}, {"type", "quantitative"}, {"scale", x_scale}, {"title", "B / A"}}},
               {"y", y},
               {"tooltip", json::array({{{"field", "edge"}, {"title", "claimed bound"}}})}}}},
            {{"data", {{"values", rows}}},
             {"mark", {{"type", "rule"}, {"strokeWidth", 2}}},
             {"encoding",
              {{"x", {{"field", "lower"}, {"type", "quantitative"}, {"scale", x_scale}}},
               {"x2", {{"field", "upper"}}},
               {"y", y},
               {"color", {{"field", "verdict"}, {"type", "nominal"}, {"scale", {{"domain", domain}, {"range", range}}}}}}}},
            {{"data", {{"values", rows}}},
             {"mark", {{"type", "point"}, {"filled", true}, {"size", 70}}},
             {"encoding",
              {{"x", {{"field", "ratio"}, {"type", "quantitative"}, {"scale", x_scale}}},
               {"y", y},
               {"color", {{"field", "verdict"}, {"type", "nominal"}, {"scale", {{"domain", domain}, {"range", range}}}}},
               {"tooltip", json::array({{{"field", "claim"}},
                                        {{"field", "verdict"}},
                                        {{"field", "ratio"}, {"format", ".3f"}},
                                        {{"field", "lower"}, {"format", ".3f"}},
                                        {{"field", "upper"}, {"format", ".3f"}},
                                        {{"field", "claimed"}},
                                        {{"field", "runs"}, {"title", "runs A/B"}}})}}}}})}};
  out << charts.add(std::move(spec)) << table.str();
  return out.str();
}

}  // namespace report
}  // namespace runner::cli
