// runner compare A B: per metric, the ratio of medians over repetitions with a
// bootstrap confidence interval, a Mann-Whitney U test and a verdict, after
// the fingerprint diff of the two sides. A regression gate for CI.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "comparison.hpp"
#include "selection.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {


// "0.4s", "12.5s", "3m20s": run spans are often seconds.
std::string short_duration(double seconds) {
  if (std::abs(seconds) >= 60) return format_duration(std::abs(seconds));
  return fixed(std::abs(seconds), 1) + "s";
}

// A deterministic row has no interval and no p: null in JSON, empty in CSV.
std::string json_or_null(double v, bool absent) {
  if (absent) return "null";
  std::ostringstream out;
  out << v;
  return out.str();
}
std::string csv_or_empty(double v, bool absent) { return absent ? std::string() : json_or_null(v, false); }

std::string signed_pct(double pct) { return (pct >= 0 ? "+" : "") + fixed(pct, 1) + "%"; }

int handle_compare(const Args& args, const Global& global) {
  const store::Store db = store::Store::open_read_only(global.db);
  Side a, b;
  if (!by_option(args).empty()) {
    std::tie(a, b) = split_by(db, args);
  } else {
    if (args.positionals.size() != 2)
      throw Error("runner compare: expected two selectors A and B, found " +
                      std::to_string(args.positionals.size()),
                  "usage: runner compare A B [options], or runner compare experiment:NAME --by KEY");
    a = select(db, args.positionals[0]);
    b = select(db, args.positionals[1]);
  }
  for (const Side* side : {&a, &b})
    if (side->runs.empty())
      throw Error("side " + side->name + " has no finished runs", "runner runs lists what is recorded");
  const std::string format = args.get("--format", "table");
  if (format != "table" && format != "json" && format != "csv")
    throw Error("--format must be table, json or csv, found '" + format + "'");
  double fail_above = -1;
  if (args.has("--fail-above")) {
    const std::optional<double> value = parse_double(args.get("--fail-above"));
    if (!value || !(*value >= 0))  // nan fails too
      throw Error("--fail-above must be a percentage >= 0, found '" + args.get("--fail-above") + "'");
    fail_above = *value;
  }
  const std::optional<double> margin = margin_option(args);

  const SideComparison compared = compare_sides(a, b, margin);
  const auto& diff = compared.diff;
  const auto& rows = compared.rows;
  const auto& schedule = compared.schedule;
  const std::string& headline = compared.headline;
  const std::size_t count_a = compared.fingerprints_a, count_b = compared.fingerprints_b;
  const bool blocks = schedule && schedule->separate_blocks;
  bool gate_failed = false;
  if (fail_above >= 0 && !rows.empty()) gate_failed = store::regression_beyond(rows.front().result, fail_above);
  const bool reliable = rows.empty() || rows.front().result.reliable;

  if (format == "json") {
    std::cout << "{\"a\":{\"selector\":" << json_quote(a.name) << ",\"runs\":" << a.runs.size()
              << "},\"b\":{\"selector\":" << json_quote(b.name) << ",\"runs\":" << b.runs.size()
              << "},\"fingerprint_differences\":[";
    bool first = true;
    for (const auto* group : {&diff.matters, &diff.benign})
      for (const auto& d : *group) {
        std::cout << (first ? "" : ",") << "{\"key\":" << json_quote(d.key)
                  << ",\"matters\":" << (group == &diff.matters ? "true" : "false")
                  << ",\"a\":" << (d.a ? json_quote(*d.a) : "null")
                  << ",\"b\":" << (d.b ? json_quote(*d.b) : "null") << "}";
        first = false;
      }
    std::cout << "],\"metrics\":[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i].result;
      std::cout << (i ? "," : "") << "{\"metric\":" << json_quote(rows[i].spec.name)
                << ",\"n_a\":" << r.n_a << ",\"n_b\":" << r.n_b << ",\"median_a\":" << r.median_a
                << ",\"median_b\":" << r.median_b << ",\"ratio\":" << r.ratio.ratio
                << ",\"ci_lower\":" << json_or_null(r.ratio.lower, r.deterministic)
                << ",\"ci_upper\":" << json_or_null(r.ratio.upper, r.deterministic)
                << ",\"p_value\":" << json_or_null(r.test.p_value, r.deterministic) << ",\"verdict\":"
                << json_quote(verdict_text(rows[i]))
                << ",\"significant\":" << (r.significant ? "true" : "false")
                << ",\"margin_pct\":" << rows[i].margin_pct
                << ",\"reliable\":" << (r.reliable ? "true" : "false")
                << ",\"deterministic\":" << (r.deterministic ? "true" : "false")
                << ",\"smallest_p\":" << r.smallest_p << "}";
    }
    std::cout << "],\"schedule\":";
    if (schedule) {
      const auto opt = [](const std::optional<double>& v) {
        return v ? format_number(*v) : std::string("null");
      };
      std::cout << "{\"interleaving\":" << schedule->interleaving
                << ",\"separate_blocks\":" << (schedule->separate_blocks ? "true" : "false")
                << ",\"gap_s\":" << schedule->gap_s << ",\"drift_a_pct\":"
                << opt(schedule->drift_a_pct) << ",\"drift_b_pct\":" << opt(schedule->drift_b_pct)
                << ",\"gap_drift_pct\":" << opt(schedule->gap_drift_pct) << "}";
    } else {
      std::cout << "null";
    }
    std::cout << ",\"regression\":" << (gate_failed ? "true" : "false") << "}\n";
  } else if (format == "csv") {
    std::cout << "metric,n_a,n_b,median_a,median_b,ratio,ci_lower,ci_upper,p_value,verdict,reliable,"
                 "margin_pct,separate_blocks\n";
    for (const auto& row : rows) {
      const auto& r = row.result;
      std::cout << row.spec.name << "," << r.n_a << "," << r.n_b << "," << r.median_a << ","
                << r.median_b << "," << r.ratio.ratio << "," << csv_or_empty(r.ratio.lower, r.deterministic)
                << "," << csv_or_empty(r.ratio.upper, r.deterministic) << ","
                << csv_or_empty(r.test.p_value, r.deterministic) << "," << verdict_text(row) << ","
                << (r.reliable ? "true" : "false") << "," << row.margin_pct << ","
                << (blocks ? "true" : "false") << "\n";
    }
  } else {
    std::cout << "A: " << terminal_safe(a.name) << " (" << a.runs.size() << " finished run(s))\n"
              << "B: " << terminal_safe(b.name) << " (" << b.runs.size() << " finished run(s))\n\n";
    if (blocks) {
      const auto& c = *schedule;
      std::cout << "WARNING: A and B ran in separate blocks of time, not interleaved "
                << "(interleaving " << fixed(c.interleaving, 2) << "; B's runs started "
                << short_duration(c.gap_s) << (c.gap_s >= 0 ? " after" : " before")
                << " A's on average): a drift of the machine between the blocks reads as an "
                   "effect.\n";
      if (c.drift_a_pct || c.drift_b_pct) {
        std::cout << "  drift seen within the sides (" << headline << " trend):";
        if (c.drift_a_pct)
          std::cout << " A " << signed_pct(*c.drift_a_pct) << " over "
                    << short_duration(c.span_a_s);
        if (c.drift_b_pct)
          std::cout << (c.drift_a_pct ? "," : "") << " B " << signed_pct(*c.drift_b_pct)
                    << " over " << short_duration(c.span_b_s);
        std::cout << "\n";
      }
      if (c.gap_drift_pct)
        std::cout << "  that trend carried over the gap between the blocks alone would make B/A "
                  << signed_pct(*c.gap_drift_pct) << "\n";
      std::cout << "  run the sides interleaved instead: 'runner run A.toml B.toml' (one "
                   "schedule, A1 B1 A2 B2 ...), or one file with a sweep, then compare\n\n";
    }
    if (count_a > 1 || count_b > 1)
      std::cout << "note: a side spans several fingerprints; the first run's is diffed\n";
    if (diff.matters.empty()) {
      std::cout << "environment: no differences that matter for performance\n";
    } else {
      std::cout << "environment differences that matter for performance:\n";
      for (const auto& d : diff.matters)
        std::cout << "  " << terminal_safe(d.key) << ": " << terminal_safe(d.a.value_or("(absent)"))
                  << "  ->  " << terminal_safe(d.b.value_or("(absent)")) << "\n";
    }
    if (args.has("--all-differences"))
      for (const auto& d : diff.benign)
        std::cout << "  (benign) " << terminal_safe(d.key) << ": "
                  << terminal_safe(d.a.value_or("(absent)")) << "  ->  "
                  << terminal_safe(d.b.value_or("(absent)")) << "\n";
    else if (!diff.benign.empty())
      std::cout << "(" << diff.benign.size()
                << " benign difference(s) such as hostname or commit; --all-differences shows them)\n";
    std::cout << "\n";
    if (const std::string note = sample_size_note(compared); !note.empty()) std::cout << note << "\n\n";
    Table table({"metric", "A median", "B median", "B/A", "95% CI", "p", "verdict"});
    for (const auto& row : rows) {
      const auto& r = row.result;
      table.add({row.spec.name, format_metric(r.median_a, row.spec.kind), format_metric(r.median_b, row.spec.kind),
                 fixed(r.ratio.ratio, 3), interval_cell(row), p_cell(row), verdict_text(row)});
    }
    table.print(std::cout);
    if (const std::string note = seed_note(compared); !note.empty()) std::cout << note << "\n";
    std::cout << "\nper-run medians over repetitions; Mann-Whitney U (two-sided), bootstrap CI of "
                 "the ratio of medians; faster or slower only when p < 0.05 and the whole CI lies "
                 "beyond the margin ("
              << (margin ? "--margin " + format_number(*margin) + "%"
                         : std::string("default: each metric's run-to-run noise, at least ") +
                               format_number(store::kMinMarginPct) + "%")
              << "), equivalent when it lies within it\n";
    if (!rows.empty()) {
      const auto& r = rows.front().result;
      const auto pct = [](const std::optional<double>& cv) {
        return cv ? fixed(*cv * 100, 1) + "%" : std::string("-");
      };
      std::cout << "run-to-run variation of " << rows.front().spec.name << ": A " << pct(r.cv_a)
                << ", B " << pct(r.cv_b) << " (coefficient of variation of per-run medians; robust: A "
                << pct(r.robust_a) << ", B " << pct(r.robust_b) << ")\n";
    }
    if (!reliable) std::cout << "warning: " << store::kUnreliableMessage << "\n";
    if (fail_above >= 0)
      std::cout << (gate_failed ? "REGRESSION: " : "gate passed: ") << headline << " of B is "
                << (gate_failed ? "" : "not ") << "slower than A by more than " << fail_above
                << "% with significance\n";
  }
  return gate_failed ? kExitRunFailed : kExitOk;
}

}  // namespace

Command compare_command() {
  CommandDef def;
  def.name = "compare";
  def.summary = "compare two sets of runs: ratio, confidence interval, significance, verdict";
  def.usage = "runner compare A B [options]";
  def.positionals = {"A"};
  def.variadic = true;
  def.options = side_options();
  def.options.insert(def.options.end(),
                     {{"--fail-above", "PCT",
                       "exit 1 if B is slower than A by more than PCT % (significant)", false},
                      {"--format", "FORMAT", "table (default), json or csv", false},
                      {"--all-differences", "", "also list benign fingerprint differences", false}});
  def.details =
      "A and B are RUN_ID, run:ID[,ID...], trial:ID[,ID...] or experiment:NAME; only finished\n"
      "runs count, and each run contributes one value per metric (its median step time, its\n"
      "throughput). Fewer than 5 runs per side is flagged as unreliable. --fail-above checks\n"
      "the headline metric (step_time, or latency for inference): the whole confidence\n"
      "interval must lie beyond the threshold, so it fires reliably only on regressions\n"
      "clearly larger than PCT (see docs/method.md). A verdict says faster or slower only when\n"
      "the whole interval lies beyond the margin, 'equivalent within +/-X%' when it lies inside,\n"
      "and 'undecided' otherwise, with the reason (too few runs for p < 0.05, an interval\n"
      "crossing the margin, or p). A metric with one value in every run of each side (a\n"
      "held-out metric with one seed) gets no p and no interval: 'differs' or 'same'. Sides\n"
      "that ran in separate blocks of time, not interleaved, are flagged with the drift\n"
      "visible within them.";
  return {def, &handle_compare};
}

}  // namespace runner::cli
