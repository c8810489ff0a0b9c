// The page of `runner report` (see report_html.hpp, docs/report.md): the
// helpers every part shares and the assembly of the page from the sections
// of report_charts.cpp and report_tables.cpp. Charts are Vega-Lite
// specifications drawn in the browser by the inlined library.
#include <cmath>
#include <map>
#include <sstream>

#include "report_parts.hpp"
#include "runner/common/run_kind.hpp"
#include "table.hpp"

namespace runner::cli {

namespace assets {
extern const std::string_view vega, vega_lite, vega_embed, page_script, page_style,
    library_versions;
}

namespace report {

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

std::string verdict_word(const std::string& verdict) { return verdict.substr(0, verdict.find(' ')); }

std::string Charts::add(json spec) {
  spec["$schema"] = "https://vega.github.io/schema/vega-lite/v6.json";
  spec["config"] = {{"font", "DejaVu Sans, sans-serif"},
                    {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}}},
                    {"legend", {{"labelLimit", 360}}}};
  const std::string id = "spec-" + std::to_string(count_++);
  return "<div class=\"chart\" data-spec=\"" + id + "\"></div>\n<script type=\"application/json\" id=\"" +
         id + "\">" + script_json(spec) + "</script>\n";
}

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

}  // namespace report

std::string render_report(const ReportInput& in) {
  using namespace report;
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
       << (in.claims.empty() ? "" : "<a href=\"#claims\">claims</a>")
       << "<a href=\"#summary\">summary</a><a href=\"#runs-section\">runs</a><a href=\"#sweep\">sweep</a>"
          "<a href=\"#distributions\">step times</a><a href=\"#loss\">loss</a>"
          "<a href=\"#history\">history</a><a href=\"#details\">configuration and environment</a></nav>\n"
       << "<div id=\"report-problems\" hidden><strong>This page raised problems while drawing:</strong>"
          "<ul></ul></div>\n";
  if (in.sides) body << comparison_section(charts, in);
  if (!in.claims.empty()) body << claims_section(charts, in);
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
