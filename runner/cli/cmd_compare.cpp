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

// How one comparison is printed, the same for every pair of a split.
struct Output {
  std::string format;                 // table, json or csv
  double fail_above = -1;             // the gate's threshold in percent, -1 without one
  std::optional<double> margin;       // --margin
  bool all_differences = false;       // --all-differences
  std::string note;                   // a line after the sides' names, "" for none
};

// A CSV field: quoted when it holds a comma or a quote.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Prints the comparison of two sides; `csv_prefix` starts every CSV row (the
// pair's column). Returns whether the gate failed.
bool print_comparison(const Side& a, const Side& b, const Output& o, const std::string& csv_prefix) {
  const std::string& format = o.format;
  const double fail_above = o.fail_above;
  const std::optional<double>& margin = o.margin;
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
    for (const auto& row : rows) {
      const auto& r = row.result;
      std::cout << csv_prefix << row.spec.name << "," << r.n_a << "," << r.n_b << "," << r.median_a << ","
                << r.median_b << "," << r.ratio.ratio << "," << csv_or_empty(r.ratio.lower, r.deterministic)
                << "," << csv_or_empty(r.ratio.upper, r.deterministic) << ","
                << csv_or_empty(r.test.p_value, r.deterministic) << "," << verdict_text(row) << ","
                << (r.reliable ? "true" : "false") << "," << row.margin_pct << ","
                << (blocks ? "true" : "false") << "\n";
    }
  } else {
    std::cout << "A: " << terminal_safe(a.name) << " (" << a.runs.size() << " finished run(s))\n"
              << "B: " << terminal_safe(b.name) << " (" << b.runs.size() << " finished run(s))\n";
    if (!o.note.empty()) std::cout << terminal_safe(o.note) << "\n";
    std::cout << "\n";
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
    if (o.all_differences)
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
  return gate_failed;
}

constexpr const char* kCsvHeader =
    "metric,n_a,n_b,median_a,median_b,ratio,ci_lower,ci_upper,p_value,verdict,reliable,"
    "margin_pct,separate_blocks\n";

void check_sides(const Side& a, const Side& b) {
  for (const Side* side : {&a, &b})
    if (side->runs.empty())
      throw Error("side " + side->name + " has no finished runs", "runner runs lists what is recorded");
}

// --pairs: one comparison per pair of like trials, each headed by the values
// of the other keys that vary; a gate fails when any pair's does.
int print_pairs(const Split& split, const Output& o) {
  // A sweep under way, or one whose runs failed, still compares the pairs it
  // has; the others are named.
  std::vector<const SidePair*> ready;
  std::vector<std::string> skipped;
  for (const SidePair& p : split.pairs) {
    if (!p.a.runs.empty() && !p.b.runs.empty())
      ready.push_back(&p);
    else
      skipped.push_back("trial:" + std::to_string(p.trial_a) + " vs trial:" +
                        std::to_string(p.trial_b) + " (" + p.context + ")");
  }
  if (split.pairs.empty())
    throw Error("--pairs: no trial of " + split.side_a + " is like one of " + split.side_b +
                    " in " + join(split.varying, ", "),
                "compare trials directly: runner compare trial:N trial:M");
  if (ready.empty())
    throw Error("--pairs: no pair of like trials has finished runs on both sides",
                "runner runs lists what is recorded");
  bool gate_failed = false;
  const std::size_t n = ready.size();
  if (o.format == "json") std::cout << "{\"pairs\":[";
  if (o.format == "csv") std::cout << "pair,trial_a,trial_b," << kCsvHeader;
  if (o.format == "table")
    std::cout << n << " pair(s) of trials alike in every key but the compared one (the keys "
              << "that vary besides it: " << join(split.varying, ", ") << ")\n";
  for (std::size_t i = 0; i < n; ++i) {
    const SidePair& p = *ready[i];
    if (o.format == "table") {
      std::cout << "\n== pair " << i + 1 << " of " << n << ": " << terminal_safe(p.context)
                << " (trial:" << p.trial_a << " vs trial:" << p.trial_b << ")\n";
    } else if (o.format == "json") {
      std::cout << (i ? "," : "") << "{\"pair\":" << json_quote(p.context)
                << ",\"trial_a\":" << p.trial_a << ",\"trial_b\":" << p.trial_b
                << ",\"comparison\":";
    }
    const std::string prefix =
        csv_field(p.context) + "," + std::to_string(p.trial_a) + "," + std::to_string(p.trial_b) + ",";
    gate_failed = print_comparison(p.a, p.b, o, prefix) || gate_failed;
    if (o.format == "json") std::cout << "}";
  }
  if (o.format == "json") {
    std::cout << "],\"unmatched\":[";
    for (std::size_t i = 0; i < split.unmatched.size(); ++i)
      std::cout << (i ? "," : "") << json_quote(split.unmatched[i]);
    std::cout << "],\"skipped\":[";
    for (std::size_t i = 0; i < skipped.size(); ++i)
      std::cout << (i ? "," : "") << json_quote(skipped[i]);
    std::cout << "],\"regression\":" << (gate_failed ? "true" : "false") << "}\n";
  } else if (o.format == "table") {
    if (!split.unmatched.empty())
      std::cout << "\nwithout a like trial on the other side: "
                << terminal_safe(join(split.unmatched, ", ")) << "\n";
    if (!skipped.empty())
      std::cout << "\nno finished runs on a side, not compared: " << terminal_safe(join(skipped, ", "))
                << "\n";
  }
  return gate_failed ? kExitRunFailed : kExitOk;
}

int handle_compare(const Args& args, const Global& global) {
  const store::Store db = store::Store::open_read_only(global.db);
  Output o;
  o.format = args.get("--format", "table");
  if (o.format != "table" && o.format != "json" && o.format != "csv")
    throw Error("--format must be table, json or csv, found '" + o.format + "'");
  if (args.has("--fail-above")) {
    const std::optional<double> value = parse_double(args.get("--fail-above"));
    if (!value || !(*value >= 0))  // nan fails too
      throw Error("--fail-above must be a percentage >= 0, found '" + args.get("--fail-above") + "'");
    o.fail_above = *value;
  }
  o.margin = margin_option(args);
  o.all_differences = args.has("--all-differences");
  Side a, b;
  if (!by_option(args).empty()) {
    SplitRequest request = split_request(args);
    request.pairs = args.has("--pairs");
    Split split = split_experiment(db, request);
    if (request.pairs && !split.varying.empty()) return print_pairs(split, o);
    if (!split.differ_between.empty())
      o.note = "note: the sides differ in more than " + request.key + ": also in " +
               join(split.differ_between, ", ");
    a = std::move(split.pairs.front().a);
    b = std::move(split.pairs.front().b);
  } else {
    if (args.has("--pairs"))
      throw Error("--pairs needs --by KEY: it pairs the trials of one experiment:NAME",
                  "e.g. runner compare experiment:custom_kernels --by kernel.impl --pairs");
    if (args.positionals.size() != 2)
      throw Error("runner compare: expected two selectors A and B, found " +
                      std::to_string(args.positionals.size()),
                  "usage: runner compare A B [options], or runner compare experiment:NAME --by KEY");
    a = select(db, args.positionals[0]);
    b = select(db, args.positionals[1]);
    // Files that differ only in their name share their trials' runs.
    const auto ids = [](const Side& side) {
      std::set<std::int64_t> out;
      for (const auto& run : side.runs) out.insert(run.row.id);
      return out;
    };
    if (!a.runs.empty() && ids(a) == ids(b))
      o.note = "note: " + a.name + " and " + b.name + " are the same runs: one configuration, " +
               "run once and shared (run both files with --force for an A/A comparison)";
  }
  check_sides(a, b);
  if (o.format == "csv") std::cout << kCsvHeader;
  return print_comparison(a, b, o, "") ? kExitRunFailed : kExitOk;
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
                      {"--pairs", "",
                       "with --by: compare pair by pair, one comparison per pair of trials that "
                       "differ in the --by key alone",
                       false},
                      {"--all-differences", "", "also list benign fingerprint differences", false}});
  def.details =
      "A and B are RUN_ID, run:ID[,ID...], trial:ID[,ID...], experiment:NAME or\n"
      "label:KEY=VALUE (e.g. label:commit=abc123); only finished\n"
      "runs count, and each run contributes one value per metric (its median step time, its\n"
      "throughput). Fewer than 5 runs per side is flagged as unreliable.\n"
      "\n"
      "Verdicts: faster or slower only when the Mann-Whitney U test gives p < 0.05 and the\n"
      "whole 95% confidence interval of B/A lies beyond the margin; 'equivalent within +/-X%'\n"
      "when it lies inside. 'undecided' means neither: the runs cannot tell a difference from\n"
      "noise, and the verdict says why (too few runs a side to reach p < 0.05, an interval\n"
      "crossing the margin, or p >= 0.05); record more repetitions before reading the ratio.\n"
      "A metric with one value in every run of each side (a held-out metric with one seed)\n"
      "gets no p and no interval: 'differs' or 'same'.\n"
      "\n"
      "--by KEY splits one experiment:NAME by a swept key. A side pools only trials that\n"
      "differ in nothing but KEY and the --where keys: when other swept keys vary too (another\n"
      "operator, shape or rank), compare refuses and names them with the --where that fixes\n"
      "it, or --pairs compares pair by pair, one comparison per combination of the other keys.\n"
      "--fail-above checks the headline metric (step_time, or latency for inference): the\n"
      "whole confidence interval must lie beyond the threshold, so it fires reliably only on\n"
      "regressions clearly larger than PCT (see docs/method.md). Sides whose runs ran in\n"
      "separate blocks of time (all of A, then all of B) are flagged with the drift visible\n"
      "within them.";
  return {def, &handle_compare};
}

}  // namespace runner::cli
