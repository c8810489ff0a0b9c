// The tables of `runner report` (docs/report.md): the summary per trial,
// the runs, the comparison section (environment, schedule warning, verdicts)
// and each trial's configuration and run details.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "report_parts.hpp"
#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/common/strings.hpp"
#include "runner/experiment/config_toml.hpp"
#include "runner/store/statistics.hpp"
#include "table.hpp"

namespace runner::cli::report {
namespace {

std::optional<double> median_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  return store::median(std::move(values));
}

// Median over a trial's finished runs of one per-run value.
template <typename F>
std::optional<double> trial_median(const TrialGroup& g, F&& value_of) {
  std::vector<double> values;
  for (const auto* run : g.finished)
    if (const std::optional<double> v = value_of(*run); v && std::isfinite(*v)) values.push_back(*v);
  return median_of(std::move(values));
}

std::string verdict_class(const std::string& verdict) { return "verdict-" + verdict_word(verdict); }

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

}  // namespace

std::string summary_table(const ReportInput& in, const std::vector<TrialGroup>& trials) {
  std::ostringstream out;
  out << "<table class=\"sortable\" id=\"trials\"><thead><tr><th>trial</th><th>experiment</th>"
         "<th>sweep point</th><th>kind</th><th class=\"num\">runs</th><th class=\"num\">finished</th>"
         "<th class=\"num\">median</th><th class=\"num\">p90</th><th class=\"num\">throughput</th>"
         "<th class=\"num\">peak memory</th><th class=\"num\">data set</th><th class=\"num\">final loss</th>"
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
    const auto data_set = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "data_set_bytes"); });
    const auto loss = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "loss_final"); });
    const auto accuracy = trial_median(g, [](const store::RunDetail& r) { return metric_of(r, "eval_accuracy"); });
    out << "<tr><td data-sort=\"" << g.id << "\"><a href=\"#trial-" << g.id << "\">trial " << g.id
        << "</a></td><td>" << esc(first.row.experiment) << "</td><td class=\"label\">" << esc(first.row.label)
        << "</td><td>" << to_string(first.row.kind) << "</td>"
        << num_cell(static_cast<double>(g.runs.size()), std::to_string(g.runs.size()))
        << num_cell(static_cast<double>(g.finished.size()), std::to_string(g.finished.size()))
        << num_cell(p50, p50 ? format_ns(*p50) : "-") << num_cell(p90, p90 ? format_ns(*p90) : "-")
        << num_cell(throughput, throughput ? format_number(*throughput) + " " + unit : "-")
        << num_cell(memory, memory ? format_number(*memory / 1e6) + " MB" : "-")
        << num_cell(data_set, data_set ? format_number(*data_set / 1e6) + " MB" : "-")
        << num_cell(loss, loss ? format_number(*loss) : "-")
        << num_cell(accuracy, accuracy ? format_number(*accuracy) : "-") << "</tr>\n";
  }
  out << "</tbody></table>\n<p class=\"note\">Median over each trial's finished runs of the run's "
         "median (p50) and p90 of its headline time (step_time for training, latency for inference, "
         "call_time for kernels), its throughput, its peak memory (the model's run over the "
         "measured steps above the data set: CUDA allocated on a GPU, CPU allocations otherwise), "
         "the data set the loaders hold, its final training loss and held-out accuracy "
         "(docs/measurement.md). Click a column to sort.</p>\n";
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
        << run.row.trial_id << "</td><td class=\"label\">" << esc(run.row.label) << "</td>"
        << num_cell(static_cast<double>(run.row.repeat_index), std::to_string(run.row.repeat_index))
        << "<td>" << status_badge(run.row.status) << "</td><td class=\"time\">" << esc(run.row.started_at)
        << "</td>" << num_cell(s ? std::optional(s->p50) : std::nullopt, s ? format_ns(s->p50) : "-")
        << num_cell(static_cast<double>(run.sample_count), std::to_string(run.sample_count))
        << "<td class=\"error\">" << esc(run.error) << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
  return out.str();
}

std::string comparison_section(Charts& charts, const ReportInput& in) {
  std::ostringstream out;
  out << "<h2 id=\"comparison\">Comparison</h2>\n<p>A: <code>" << esc(in.sides->first)
      << "</code> &nbsp; B: <code>" << esc(in.sides->second) << "</code></p>\n";
  if (!in.comparison) {
    out << "<p class=\"warning\">" << esc(in.comparison_note) << "</p>\n";
    return out.str();
  }
  const SideComparison& c = *in.comparison;
  // What else differs between the sides' configurations first: an effect of
  // the compared key cannot be told from an effect of any of these.
  out << "<h3>Configuration</h3>\n";
  const std::string key = in.compared_key.empty() ? "" : "<code>" + esc(in.compared_key) + "</code>";
  if (in.config_differences.empty()) {
    out << "<p>" << (key.empty() ? "The sides have the same configuration."
                                 : "The sides' configurations differ only in " + key + ".")
        << "</p>\n";
  } else {
    const std::string n = std::to_string(in.config_differences.size());
    out << "<p class=\"warning\">"
        << (key.empty() ? "The sides' configurations differ in the " + n +
                              " key(s) below: the verdicts are of these differences together."
                        : "The sides differ in more than " + key + ": also in the " + n +
                              " key(s) below, so the verdicts cannot be put down to " + key +
                              " alone; compare trials that differ only in it (<code>--where "
                              "KEY=VALUE</code> for each other key).")
        << "</p>\n"
           "<table id=\"config-diff\"><thead><tr><th>configuration key</th><th>A</th><th>B</th>"
           "</tr></thead><tbody>\n";
    for (const ConfigDifference& d : in.config_differences)
      out << "<tr><td><code>" << esc(d.key) << "</code></td><td>" << esc(d.a) << "</td><td>"
          << esc(d.b) << "</td></tr>\n";
    out << "</tbody></table>\n";
  }
  // Then the environment: a difference there explains more than any statistic.
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
  out << "<h3>Verdicts</h3>\n";
  // As compare prints them: the sample size that cannot decide before the
  // verdicts, the seed note on held-out metrics after them.
  if (const std::string note = sample_size_note(c); !note.empty())
    out << "<p class=\"warning\" id=\"sample-size\">" << esc(note) << "</p>\n";
  out << forest_plot(charts, c);
  out << "<table id=\"verdicts\"><thead><tr><th>metric</th><th class=\"num\">A median</th>"
         "<th class=\"num\">B median</th><th class=\"num\">B/A</th><th class=\"num\">95% CI</th>"
         "<th class=\"num\">p</th><th class=\"num\">runs A/B</th><th>verdict</th></tr></thead><tbody>\n";
  for (const MetricRow& row : c.rows) {
    const auto& r = row.result;
    const std::string verdict = verdict_text(row);
    out << "<tr><td>" << esc(row.spec.name) << "</td><td class=\"num\">"
        << esc(format_metric(r.median_a, row.spec.kind)) << "</td><td class=\"num\">"
        << esc(format_metric(r.median_b, row.spec.kind)) << "</td><td class=\"num\">"
        << fixed(r.ratio.ratio, 3) << "</td><td class=\"num\">" << interval_cell(row)
        << "</td><td class=\"num\">" << p_cell(row)
        << "</td><td class=\"num\">" << r.n_a << "/" << r.n_b << "</td><td class=\""
        << verdict_class(verdict) << "\">" << esc(verdict) << "</td></tr>\n";
  }
  out << "</tbody></table>\n<p class=\"note\">Per-run medians over repetitions; Mann-Whitney U "
         "(two-sided) and a bootstrap CI of the ratio of medians; faster or slower only when p &lt; "
         "0.05 and the whole CI lies beyond the margin (each metric's run-to-run noise, at least "
      << format_number(store::kMinMarginPct) << "%), equivalent when it lies within it "
         "(docs/method.md). A metric with the same value in every run of each side has no "
         "spread, so no p and no interval (\"-\"): its ratio is exact, and it reads differs or "
         "same, never faster or slower (a diamond without a line in the plot).</p>\n";
  if (const std::string note = seed_note(c); !note.empty())
    out << "<p class=\"note\">" << esc(note) << "</p>\n";
  if (!c.rows.front().result.reliable)
    out << "<p class=\"warning\">" << esc(std::string(store::kUnreliableMessage)) << "</p>\n";
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

}  // namespace runner::cli::report
