// runner check FILE...: run what the files' [[expect]] tables need (as `run`
// does: resumable, interleaved, shardable), then judge every expectation
// against the store and print one line per expectation; the exit code is
// the gate (docs/cli.md, "check").
#include <spdlog/spdlog.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.hpp"
#include "running.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/scheduler/auto_repeats.hpp"
#include "runner/scheduler/judge.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {

namespace {

/// Some expectation is neither shown to hold nor refuted.
constexpr int kExitUndecided = 3;

struct Checked {
  std::string experiment;  // its name
  std::string file;        // as given
  std::int64_t repeats = 1;
  bool auto_repeats = false;  // repeats = "auto": more runs come from max_repeats
  Judgement judgement;
};

// "< 0.5", "> 1.2" or "within +/-5 %".
std::string claimed(const Expectation& e) {
  switch (e.bound) {
    case ExpectBound::ratio_below: return "< " + format_number(e.value);
    case ExpectBound::ratio_above: return "> " + format_number(e.value);
    case ExpectBound::equivalent_within: return "within +/-" + format_number(100 * e.value) + " %";
  }
  return "";
}

bool has_values(const store::ExpectationResult& r) { return r.n_a > 0 && r.n_b > 0; }

std::string sides(const Expectation& e) {
  std::string out = e.by + " " + bare_value(e.versus) + " / " + bare_value(e.baseline);
  for (const auto& [key, value] : e.where) out += ", " + key + "=" + bare_value(value);
  return out;
}

// The runs a side an undecided expectation would likely need, as advice.
std::string advice(const Checked& c) {
  const store::ExpectationResult& r = c.judgement.result;
  if (r.verdict != store::ExpectationVerdict::undecided) return "";
  std::string out = "undecided (" + r.reason + ")";
  if (!r.more_runs) return out + ": more runs are unlikely to decide it at this spread";
  const std::size_t have = std::min(r.n_a, r.n_b);
  const std::size_t want = have + *r.more_runs;
  const std::string key = c.auto_repeats ? "experiment.max_repeats=" : "experiment.repeats=";
  return out + ": about " + std::to_string(*r.more_runs) + " more run(s) a side would likely decide it (" +
         "runner check " + c.file + " --set " + key +
         std::to_string(std::max<std::int64_t>(static_cast<std::int64_t>(want), c.repeats)) + ")";
}

void print_table(const std::vector<Checked>& all, bool several) {
  std::vector<std::string> header{"#", "verdict", "B/A", "95% CI", "claimed", "runs A/B", "metric", "claim"};
  if (several) header.insert(header.begin() + 1, "experiment");
  Table table(header);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Judgement& j = all[i].judgement;
    const store::ExpectationResult& r = j.result;
    const bool values = has_values(r);
    std::vector<std::string> row{
        std::to_string(i + 1), std::string(store::expectation_verdict_name(r.verdict)),
        values ? fixed(r.ratio.ratio, 3) : "-",
        values ? "[" + fixed(r.ratio.lower, 3) + ", " + fixed(r.ratio.upper, 3) + "]" : "-",
        claimed(j.expectation), std::to_string(r.n_a) + "/" + std::to_string(r.n_b),
        j.expectation.metric, j.expectation.claim};
    if (several) row.insert(row.begin() + 1, all[i].experiment);
    table.add(std::move(row));
  }
  table.print(std::cout);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Checked& c = all[i];
    const Expectation& e = c.judgement.expectation;
    std::cout << "#" << i + 1 << " " << e.metric << " of " << sides(e) << " (" << e.at.str() << ")";
    if (!e.source.empty()) std::cout << "; source: " << e.source;
    std::cout << "\n";
    if (const std::string a = advice(c); !a.empty()) std::cout << "   " << a << "\n";
    if (c.judgement.failed > 0)
      std::cout << "   " << c.judgement.failed << " run(s) of these trials failed; they are left out\n";
  }
}

nlohmann::json to_json(const Checked& c) {
  const Judgement& j = c.judgement;
  const Expectation& e = j.expectation;
  const store::ExpectationResult& r = j.result;
  const bool values = has_values(r);
  nlohmann::json where = nlohmann::json::object();
  for (const auto& [key, value] : e.where) where[key] = bare_value(value);
  return {{"experiment", c.experiment},
          {"claim", e.claim},
          {"source", e.source},
          {"at", e.at.str()},
          {"metric", e.metric},
          {"by", e.by},
          {"baseline", bare_value(e.baseline)},
          {"versus", bare_value(e.versus)},
          {"where", where},
          {"bound", {{"kind", bound_key(e.bound)}, {"value", e.value}}},
          {"verdict", store::expectation_verdict_name(r.verdict)},
          {"ratio", values ? nlohmann::json(r.ratio.ratio) : nlohmann::json()},
          {"ci", values ? nlohmann::json::array({r.ratio.lower, r.ratio.upper}) : nlohmann::json()},
          {"confidence", r.ratio.confidence},
          {"runs", {r.n_a, r.n_b}},
          {"run_ids", {j.runs_a, j.runs_b}},
          {"failed_runs", j.failed},
          {"more_runs_per_side", r.more_runs ? nlohmann::json(*r.more_runs) : nlohmann::json()},
          {"reason", r.reason}};
}

int handle_check(const Args& args, const Global& global) {
  const RunFlags flags = run_flags(args, global);
  const std::string format = args.get("--format", "table");
  if (format != "table" && format != "json")
    throw Error("--format must be table or json, found '" + format + "'");
  const bool no_run = args.has("--no-run");
  if (!no_run) store::Store::check_writable(global.db);
  std::vector<PreparedExperiment> prepared;
  for (const std::string& file : args.positionals) {
    prepared.push_back(prepare(file, global, flags.set));
    const PreparedExperiment& now = prepared.back();
    if (expectations_of(now).empty())
      throw Error(file + " states no expectation",
                  "add an [[expect]] table (docs/experiment.md, \"[[expect]]\"); 'runner run' runs "
                  "a file without one");
    for (std::size_t i = 0; i + 1 < prepared.size(); ++i) {
      if (prepared[i].first().name == now.first().name)
        throw Error(file + " and " + args.positionals[i] + " are both experiment '" + now.first().name + "'",
                    "give each file of one check a distinct [experiment] name");
      if (prepared[i].first().kind != now.first().kind)
        throw Error(file + " is a " + to_string(now.first().kind) + " experiment, but " +
                        args.positionals[i] + " is a " + to_string(prepared[i].first().kind) + " one",
                    "check experiments of one kind together, or one at a time");
    }
  }
  int run_code = kExitOk;
  if (!no_run) {
    Sweep sweep;
    for (const PreparedExperiment& p : prepared) sweep.push_back(&p);
    // Standard output carries the verdicts (JSON with --format json); the
    // runs' table goes to standard error with their progress.
    std::streambuf* const out = std::cout.rdbuf(std::cerr.rdbuf());
    try {
      run_code = run_printing(sweep, flags.options, global);
    } catch (...) {
      std::cout.rdbuf(out);
      throw;
    }
    std::cout.rdbuf(out);
    if (run_code == 130) return run_code;
  }
  const std::optional<store::Store> db = store::Store::open_read_only_if_recorded(global.db);
  std::vector<Checked> all;
  for (std::size_t f = 0; f < prepared.size(); ++f) {
    const PreparedExperiment& p = prepared[f];
    for (const Expectation& e : expectations_of(p)) {
      Checked c{p.first().name, args.positionals[f], p.first().repeats, p.first().auto_repeats, {}};
      if (db) {
        // A file with repeats = "auto" is judged with the interval its rounds stopped on.
        c.judgement = judge_expectation(p, e, *db,
                                        judge_options_for(p.first(), recorded_rounds(p, *db)));
      } else {
        c.judgement.expectation = e;
        c.judgement.result = store::judge_expectation({}, {}, expected_bound(e));
      }
      all.push_back(std::move(c));
    }
  }
  bool refuted = false, undecided = false;
  for (const Checked& c : all) {
    refuted = refuted || c.judgement.result.verdict == store::ExpectationVerdict::refuted;
    undecided = undecided || c.judgement.result.verdict == store::ExpectationVerdict::undecided;
  }
  const int code = refuted || run_code != kExitOk ? kExitRunFailed
                   : undecided                    ? kExitUndecided
                                                  : kExitOk;
  if (format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const Checked& c : all) list.push_back(to_json(c));
    std::cout << nlohmann::json{{"expectations", list}, {"runs_failed", run_code != kExitOk},
                                {"exit", code}}
                     .dump()
              << "\n";
    return code;
  }
  print_table(all, prepared.size() > 1);
  if (run_code != kExitOk) std::cout << "a run these expectations need failed: see the errors above\n";
  return code;
}

}  // namespace

Command check_command() {
  CommandDef def;
  def.name = "check";
  def.summary = "run what a file's [[expect]] claims need and judge each: holds, refuted or undecided";
  def.usage = "runner check FILE [FILE...] [options]";
  def.positionals = {"FILE"};
  def.variadic = true;
  def.options = {
      {"--no-run", "", "judge only what the database holds; run nothing", false},
      {"--format", "FORMAT", "table (default) or json", false},
      {"--set", "KEY=VALUE", "override a dotted key of the file (e.g. experiment.repeats=10)", true},
      {"--rerun-failed", "", "also rerun failed, crashed, timed-out and diverged runs", false},
      {"--isolate", "MODE", "process (default: each run in a child process) or none", false},
      {"--shuffle", "", "shuffle the trial order of every round (seeded)", false},
      {"--max-failures", "N", "stop after N failed runs (default 0: no limit)", false},
      {"--max-consecutive-failures", "K", "stop after K failures in a row (default 5; 0: off)",
       false},
      {"--shard", "K/N", "run only shard K of N, then judge what the database holds", false},
      {"--label", "KEY=VALUE", "record a label with every run it runs, as runner run does", true},
  };
  def.details =
      "Every trial of each file runs as 'runner run' runs it (what is recorded is skipped,\n"
      "so the same command resumes), then each [[expect]] is judged: the ratio B/A of the\n"
      "metric's per-run values with the 95% interval 'runner compare' gives. holds: the whole\n"
      "interval satisfies the bound; refuted: the whole interval violates it; undecided:\n"
      "neither, with about how many more runs a side would likely decide it. The runs'\n"
      "progress and table go to standard error; the verdicts to standard output.\n"
      "Exit codes: 0 every expectation holds, 1 one is refuted or a run failed, 2 bad input,\n"
      "3 none refuted but some undecided, 130 interrupted.";
  return {def, &handle_check};
}

}  // namespace runner::cli
