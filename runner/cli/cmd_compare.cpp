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
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/compare.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

using store::Direction;

// The runs of one side, with what is compared.
struct Side {
  std::string name;                 // as the user wrote it, or "by value"
  std::vector<store::RunDetail> runs;
};

void add_finished(const store::Store& db, std::int64_t run_id, Side& side) {
  auto run = db.get_run(run_id);
  if (!run) throw Error("run " + std::to_string(run_id) + " is not in the database",
                        "run 'runner runs' to list the recorded runs");
  if (run->row.status == store::RunStatus::finished) side.runs.push_back(std::move(*run));
}

void add_trial(const store::Store& db, std::int64_t trial_id, Side& side) {
  for (const auto& r : db.runs_of_trial(trial_id)) add_finished(db, r.run_id, side);
}

// "12" or "run:12,13" (runs), "trial:3" (a trial's runs), "experiment:NAME"
// (every trial of an experiment; with --by, split by a key).
Side select(const store::Store& db, const std::string& selector) {
  Side side;
  side.name = selector;
  const auto colon = selector.find(':');
  const std::string kind = colon == std::string::npos ? "run" : selector.substr(0, colon);
  const std::string rest = colon == std::string::npos ? selector : selector.substr(colon + 1);
  if (kind == "run") {
    for (const auto& id : split(rest, ',')) add_finished(db, parse_integer(id, "a run id", 1), side);
  } else if (kind == "trial") {
    for (const auto& id : split(rest, ',')) add_trial(db, parse_integer(id, "a trial id", 1), side);
  } else if (kind == "experiment") {
    const auto trials = db.trials_of_experiment(rest);
    if (trials.empty())
      throw Error("no experiment named '" + rest + "' in the database",
                  "run 'runner runs' to see the recorded experiments");
    for (const auto& t : trials) add_trial(db, t.id, side);
  } else {
    throw Error("cannot read the selector '" + selector +
                    "': expected RUN_ID, run:ID[,ID...], trial:ID[,ID...] or experiment:NAME",
                "e.g. runner compare trial:1 trial:2");
  }
  return side;
}

// A configuration value as users write it in --by and --baseline: strings bare.
std::string render(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string: return v.get<std::string>();
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + render(v[i]);
      return out + "]";
    }
    case nlohmann::json::value_t::object: return "{...}";
    default: return canonical_json(v);  // numbers as stored: 0.1, 1e-04, 3.0, 64
  }
}

const nlohmann::json* member(const nlohmann::json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// The value of a dotted key in a trial's resolved configuration: a host key
// ("train.steps") or a plugin option ("model.hidden", stored under options).
std::optional<std::string> config_value(const nlohmann::json& config, const std::string& dotted) {
  const auto dot = dotted.find('.');
  const nlohmann::json* section = member(config, dotted.substr(0, dot));
  if (dot == std::string::npos) return section ? std::optional(render(*section)) : std::nullopt;
  if (section == nullptr) return std::nullopt;
  const std::string key = dotted.substr(dot + 1);
  if (const nlohmann::json* v = member(*section, key)) return render(*v);
  if (const nlohmann::json* options = member(*section, "options"))
    if (const nlohmann::json* v = member(*options, key)) return render(*v);
  return std::nullopt;
}

// The value the trial's label gives `dotted` ("data.workers=0 model.hidden=[64, 64]
// optimizer.name=\"x\""), strings unquoted, or nothing. A swept key at its
// default is left out of the identity (see split_by) but named in the label.
std::optional<std::string> label_value(const std::string& label, const std::string& dotted) {
  const std::string key = dotted + "=";
  std::size_t at = 0;
  while ((at = label.find(key, at)) != std::string::npos) {
    if (at == 0 || label[at - 1] == ' ') break;
    at += key.size();
  }
  if (at == std::string::npos) return std::nullopt;
  const std::size_t start = at + key.size();
  if (start < label.size() && label[start] == '"') {
    const std::size_t end = label.find('"', start + 1);
    if (end == std::string::npos) return std::nullopt;
    return label.substr(start + 1, end - start - 1);
  }
  if (start < label.size() && label[start] == '[') {
    int depth = 0;
    for (std::size_t i = start; i < label.size(); ++i) {
      depth += label[i] == '[' ? 1 : label[i] == ']' ? -1 : 0;
      if (depth == 0) return label.substr(start, i + 1 - start);
    }
    return std::nullopt;
  }
  return label.substr(start, label.find(' ', start) - start);
}

// A trial's value of a dotted key as --by and --where read it: from its
// configuration, else from its label, else "(default)" (see split_by).
std::string trial_value(const nlohmann::json& config, const std::string& label,
                        const std::string& key) {
  if (auto value = config_value(config, key)) return *value;
  return label_value(label, key).value_or("(default)");
}

// Splits one experiment's runs into two sides by the value of a key, among
// the trials that match every `where` ("KEY=VALUE"): side A has `baseline`
// (default: the first value), side B `versus` (default: the only other one).
std::pair<Side, Side> split_by(const store::Store& db, const std::string& selector,
                               const std::string& key, const std::string& baseline,
                               const std::string& versus, const std::vector<std::string>& where) {
  if (selector.rfind("experiment:", 0) != 0)
    throw Error("--by needs one experiment:NAME selector, found '" + selector + "'",
                "e.g. runner compare experiment:amp --by train.precision");
  const std::string name = selector.substr(11);
  const auto trials = db.trials_of_experiment(name);
  if (trials.empty())
    throw Error("no experiment named '" + name + "' in the database",
                "run 'runner runs' to see the recorded experiments");
  std::vector<std::pair<std::string, std::string>> filters;
  for (const std::string& w : where) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--where must be KEY=VALUE, found '" + w + "'",
                  "e.g. --where model.plugin=resnet (strings without quotes)");
    filters.emplace_back(w.substr(0, eq), w.substr(eq + 1));
  }
  std::map<std::string, std::vector<std::int64_t>> groups;
  std::vector<std::string> order;
  // A key at its default is left out of a trial's configuration when it
  // joined the identity later (train.precision = "fp32", model.channels_last
  // = false, ...): such trials form the group "(default)". A key no trial
  // has is a mistake.
  bool found = false;
  std::size_t kept = 0;
  for (const auto& t : trials) {
    const nlohmann::json config = parse_json(t.config_json);
    std::optional<std::string> value = config_value(config, key);
    if (!value) value = label_value(t.label, key);
    found = found || value.has_value();
    bool match = true;
    for (const auto& [k, v] : filters) match = match && trial_value(config, t.label, k) == v;
    if (!match) continue;
    ++kept;
    const std::string label = value.value_or("(default)");
    if (!groups.count(label)) order.push_back(label);
    groups[label].push_back(t.id);
  }
  if (!found)
    throw Error("--by " + key + ": no trial of '" + name + "' has such a key",
                "use a dotted key of the experiment file, e.g. train.steps or model.hidden");
  if (kept == 0)
    throw Error("--where " + join(where, " --where ") + ": no trial of '" + name + "' matches",
                "the trial labels in 'runner runs' show each trial's swept keys");
  if (groups.size() < 2)
    throw Error("--by " + key + ": every trial of '" + name + "' has " + key + " = " + order[0] +
                ", so there is nothing to compare");
  std::string a_value = baseline.empty() ? order[0] : baseline;
  if (!groups.count(a_value))
    throw Error("--baseline " + baseline + ": no trial of '" + name + "' has " + key + " = " +
                    baseline,
                "values found: " + join(order, ", "));
  std::vector<std::string> others;
  for (const auto& v : order)
    if (v != a_value) others.push_back(v);
  std::string b_value = versus;
  if (!b_value.empty() && (b_value == a_value || !groups.count(b_value)))
    throw Error("--versus " + versus + ": no other trial of '" + name + "' has " + key + " = " +
                    versus,
                "values found: " + join(order, ", "));
  if (b_value.empty()) {
    if (others.size() > 1)
      throw Error("--by " + key + " splits '" + name + "' into " + std::to_string(order.size()) +
                      " groups (" + join(order, ", ") + "); compare exactly two",
                  "pick them with --baseline VALUE --versus VALUE, or compare trials directly: "
                  "runner compare trial:N trial:M");
    b_value = others[0];
  }
  Side a, b;
  const std::string scope = filters.empty() ? "" : " (" + join(where, ", ") + ")";
  a.name = key + "=" + a_value + scope;
  b.name = key + "=" + b_value + scope;
  for (auto id : groups[a_value]) add_trial(db, id, a);
  for (auto id : groups[b_value]) add_trial(db, id, b);
  return {std::move(a), std::move(b)};
}

// Per-run values of a metric: the run's p50 of a per-step series, or a scalar metric.
void add_run_values(const store::RunDetail& run, const std::string& metric,
                    std::vector<double>& out) {
  for (const auto& s : run.summaries)
    if (s.metric == metric && s.n > 0 && s.p50 > 0) out.push_back(s.p50);
  for (const auto& m : run.metrics)
    if (m.name == metric && m.value > 0 && std::isfinite(m.value)) out.push_back(m.value);
}

std::vector<double> values_of(const Side& side, const std::string& metric) {
  std::vector<double> out;
  for (const auto& run : side.runs) add_run_values(run, metric, out);
  return out;
}

std::string fixed(double v, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << v;
  return out.str();
}

// Seconds since the epoch of an ISO-8601 UTC time as the store writes it
// ("2026-11-26T10:45:10.850Z"); nullopt when it is not of that form.
std::optional<double> epoch_seconds(const std::string& iso) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0;
  double second = 0;
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%lfZ", &year, &month, &day, &hour, &minute,
                  &second) != 6)
    return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  return static_cast<double>(::timegm(&tm)) + second;
}

// Per-run values of a metric with the run's start time, for the schedule check.
std::vector<store::TimedValue> timed_values_of(const Side& side, const std::string& metric) {
  std::vector<store::TimedValue> out;
  for (const auto& run : side.runs) {
    const auto start = epoch_seconds(run.row.started_at);
    if (!start) continue;
    std::vector<double> values;
    add_run_values(run, metric, values);
    for (double v : values) out.push_back({*start, v});
  }
  return out;
}

// "0.4s", "12.5s", "3m20s": run spans are often seconds.
std::string short_duration(double seconds) {
  if (std::abs(seconds) >= 60) return format_duration(std::abs(seconds));
  return fixed(std::abs(seconds), 1) + "s";
}

std::string signed_pct(double pct) { return (pct >= 0 ? "+" : "") + fixed(pct, 1) + "%"; }

// What a metric is, for its verdict's words: a time ("faster" when B takes
// less), a throughput, a memory peak ("smaller" when B needs less) or a
// model's quality on held-out data ("better" when B's is better).
enum class MetricKind { time, throughput, memory, quality };

struct MetricSpec {
  std::string name;
  Direction direction;
  MetricKind kind;
};

struct Row {
  MetricSpec spec;
  store::Comparison result;
  double margin_pct = 0;                  ///< practical-equivalence margin used
  store::Practical practical = store::Practical::undecided;
};

std::string fmt(double v, MetricKind kind) {
  if (kind == MetricKind::time) return format_ns(v);
  if (kind == MetricKind::memory) return format_number(v / 1e6) + " MB";
  return format_number(v);
}

// The verdict in the metric's own words, read against the margin.
std::string verdict_text(const Row& row) {
  const store::Practical v = row.practical;
  if (v == store::Practical::equivalent || v == store::Practical::undecided ||
      row.spec.kind == MetricKind::time || row.spec.kind == MetricKind::throughput)
    return store::practical_name(v, row.margin_pct);
  const bool b_better = v == store::Practical::faster;
  if (row.spec.kind == MetricKind::memory) return b_better ? "smaller" : "larger";
  return b_better ? "better" : "worse";
}

int handle_compare(const Args& args, const Global& global) {
  const store::Store db = store::Store::open_read_only(global.db);
  const std::string by = args.get("--by");
  Side a, b;
  if (!by.empty()) {
    if (args.positionals.size() != 1)
      throw Error("with --by, give one experiment:NAME selector, found " +
                  std::to_string(args.positionals.size()));
    std::vector<std::string> where;
    if (auto it = args.values.find("--where"); it != args.values.end()) where = it->second;
    std::tie(a, b) = split_by(db, args.positionals[0], by, args.get("--baseline"),
                              args.get("--versus"), where);
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
  std::optional<double> margin;
  if (args.has("--margin")) {
    const std::optional<double> value = parse_double(args.get("--margin"));
    if (!value || !(*value >= 0) || !(*value < 100))
      throw Error("--margin must be a percentage in [0, 100), found '" + args.get("--margin") + "'",
                  "e.g. --margin 2 calls differences within +/-2% equivalent");
    margin = *value;
  }

  // The fingerprint diff first: a difference in the environment explains more
  // than any statistic.
  const auto fingerprint_of = [](const Side& s) {
    std::set<std::string> hashes;
    for (const auto& r : s.runs) hashes.insert(r.fingerprint_hash);
    return std::make_pair(hashes.size(), parse_json_object(s.runs.front().fingerprint_json));
  };
  const auto [count_a, fp_a] = fingerprint_of(a);
  const auto [count_b, fp_b] = fingerprint_of(b);
  const store::FingerprintDiff diff = store::diff_fingerprints(fp_a, fp_b);

  const std::string headline = headline_metric(a.runs.front().row.kind);
  constexpr Direction lower = Direction::lower_is_better, higher = Direction::higher_is_better;
  std::vector<MetricSpec> metrics = {{headline, lower, MetricKind::time}};
  for (const store::PhaseInfo& phase : store::kPhases)
    metrics.push_back({phase.name, lower, MetricKind::time});
  metrics.push_back({"samples_per_s", higher, MetricKind::throughput});
  // Kernel runs (docs/kernels.md): what a call moved and computed per second.
  metrics.push_back({"bandwidth_bytes_per_s", higher, MetricKind::throughput});
  metrics.push_back({"flop_per_s", higher, MetricKind::throughput});
  metrics.push_back({"tokens_per_s", higher, MetricKind::throughput});
  // What the input pipeline can make when never blocked (docs/data.md).
  metrics.push_back({"loader_samples_per_s", higher, MetricKind::throughput});
  // The other side of a time/memory trade (checkpointing, precision), and
  // what a faster recipe may have cost in quality, in the same comparison.
  metrics.push_back({"peak_cpu_alloc_bytes", lower, MetricKind::memory});
  metrics.push_back({"peak_cuda_allocated_bytes", lower, MetricKind::memory});
  metrics.push_back({"eval_loss", lower, MetricKind::quality});
  metrics.push_back({"eval_accuracy", higher, MetricKind::quality});
  metrics.push_back({"eval_perplexity", lower, MetricKind::quality});
  std::vector<Row> rows;
  for (const MetricSpec& metric : metrics) {
    const auto va = values_of(a, metric.name), vb = values_of(b, metric.name);
    if (va.empty() || vb.empty()) continue;
    Row row{metric, store::compare_samples(va, vb, metric.direction)};
    row.margin_pct = margin ? *margin : store::noise_margin_pct(row.result);
    row.practical = store::practical_verdict(row.result, row.margin_pct);
    rows.push_back(std::move(row));
  }
  // When each side's runs happened: two blocks of time let machine drift
  // between them read as an effect.
  std::optional<store::ScheduleCheck> schedule;
  {
    const auto ta = timed_values_of(a, headline), tb = timed_values_of(b, headline);
    if (!ta.empty() && !tb.empty()) schedule = store::check_schedule(ta, tb);
  }
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
                << ",\"ci_lower\":" << r.ratio.lower << ",\"ci_upper\":" << r.ratio.upper
                << ",\"p_value\":" << r.test.p_value << ",\"verdict\":"
                << json_quote(verdict_text(rows[i]))
                << ",\"significant\":" << (r.significant ? "true" : "false")
                << ",\"margin_pct\":" << rows[i].margin_pct
                << ",\"reliable\":" << (r.reliable ? "true" : "false") << "}";
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
                << r.median_b << "," << r.ratio.ratio << "," << r.ratio.lower << ","
                << r.ratio.upper << "," << r.test.p_value << "," << verdict_text(row) << ","
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
    Table table({"metric", "A median", "B median", "B/A", "95% CI", "p", "verdict"});
    for (const auto& row : rows) {
      const auto& r = row.result;
      table.add({row.spec.name, fmt(r.median_a, row.spec.kind), fmt(r.median_b, row.spec.kind),
                 fixed(r.ratio.ratio, 3),
                 "[" + fixed(r.ratio.lower, 3) + ", " + fixed(r.ratio.upper, 3) + "]",
                 fixed(r.test.p_value, 4), verdict_text(row)});
    }
    table.print(std::cout);
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
  def.options = {
      {"--by", "KEY", "split one experiment:NAME into two sides by a swept key", false},
      {"--baseline", "VALUE", "with --by: the value that is side A (default: the first)", false},
      {"--versus", "VALUE", "with --by: the value that is side B (default: the only other)",
       false},
      {"--where", "KEY=VALUE", "with --by: only trials with this value of KEY", true},
      {"--fail-above", "PCT", "exit 1 if B is slower than A by more than PCT % (significant)",
       false},
      {"--margin", "PCT",
       "practical-equivalence margin: differences within +/-PCT % are not called (default: "
       "the run-to-run noise of the two sides)",
       false},
      {"--format", "FORMAT", "table (default), json or csv", false},
      {"--all-differences", "", "also list benign fingerprint differences", false},
  };
  def.details =
      "A and B are RUN_ID, run:ID[,ID...], trial:ID[,ID...] or experiment:NAME; only finished\n"
      "runs count, and each run contributes one value per metric (its median step time, its\n"
      "throughput). Fewer than 5 runs per side is flagged as unreliable. --fail-above checks\n"
      "the headline metric (step_time, or latency for inference): the whole confidence\n"
      "interval must lie beyond the threshold, so it fires reliably only on regressions\n"
      "clearly larger than PCT (see docs/method.md). A verdict says faster or slower only when\n"
      "the whole interval lies beyond the margin, 'equivalent within +/-X%' when it lies inside,\n"
      "and 'undecided' otherwise. Sides that ran in separate blocks of time, not interleaved,\n"
      "are flagged with the drift visible within them.";
  return {def, &handle_compare};
}

}  // namespace runner::cli
