// runner show RUN_ID: one run's status, statistics, metrics, files,
// evaluations, plugins and fingerprint; --ops lists the operators of its
// profiled steps.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/labels.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

/// The evaluations of a run as a table: one row per step, one column per
/// metric (by name); "-" where a metric was not recorded at a step.
Table evaluation_table(const std::vector<store::Evaluation>& evaluations) {
  std::map<std::string, std::size_t> column;  // metric -> column, after "eval step"
  for (const auto& e : evaluations) column.emplace(e.metric, 0);
  std::vector<std::string> header = {"eval step"};
  for (auto& [metric, index] : column) {
    index = header.size();
    header.push_back(terminal_safe(metric));  // Table escapes rows, not the header
  }
  Table table(header);
  // get_run() orders by step, so one step's values are adjacent.
  for (std::size_t i = 0; i < evaluations.size();) {
    const std::int64_t step = evaluations[i].step;
    std::vector<std::string> row(header.size(), "-");
    row[0] = std::to_string(step);
    for (; i < evaluations.size() && evaluations[i].step == step; ++i)
      row[column.at(evaluations[i].metric)] = format_number(evaluations[i].value);
    table.add(std::move(row));
  }
  return table;
}

// Fingerprint fields worth showing by default; --full prints all of them.
bool headline_field(const std::string& key) {
  for (const char* k : {"host.hostname", "host.os", "cpu.model", "cpu.logical_cores",
                        "memory.total", "gpu.name", "software.runner_version",
                        "software.git_commit", "software.torch_version", "threads.intra_op",
                        "threads.inter_op"})
    if (key == k) return true;
  return key.rfind("env.", 0) == 0;
}

// [profile] steps: how many steps were profiled (nothing when none were).
std::optional<std::int64_t> profiled_steps(const store::RunDetail& run) {
  for (const auto& m : run.metrics)
    if (m.name == "profiled_steps") return static_cast<std::int64_t>(m.value);
  return std::nullopt;
}

const store::RunFile* trace_file(const store::RunDetail& run) {
  for (const auto& f : run.files)
    if (f.role == "profile_trace") return &f;
  return nullptr;
}

void print_trace_hint(const store::RunFile& trace) {
  std::cout << "trace: " << terminal_safe(trace.path) << " (" << trace.bytes << " bytes)\n"
            << "  open it in https://ui.perfetto.dev or chrome://tracing\n";
}

// runner show RUN --ops: the operators of the profiled steps, by self CPU time.
int print_ops(const store::Store& db, const store::RunDetail& run, std::int64_t top) {
  const std::vector<store::OpStat> ops = db.run_ops(run.row.id);
  const auto steps = profiled_steps(run);
  if (ops.empty())
    throw Error("run " + std::to_string(run.row.id) +
                    " was not profiled; add [profile] steps = 5 to its experiment (or run it "
                    "with --set profile.steps=5) to record its operators",
                "docs/profiling.md explains what is recorded");
  bool shapes = false;
  for (const auto& op : ops) shapes = shapes || !op.input_shapes.empty();
  const std::size_t shown = std::min(ops.size(), static_cast<std::size_t>(top));
  std::cout << "run " << run.row.id << "  " << terminal_safe(run.row.experiment) << "  ("
            << run.row.kind << "): " << (steps ? std::to_string(*steps) : std::string("?"))
            << " profiled step(s); top " << shown << " of " << ops.size()
            << " operators by self CPU time\n";
  std::vector<std::string> header = {"op", "calls", "self CPU", "total CPU", "self CUDA",
                                     "total CUDA"};
  if (shapes) header.emplace_back("input shapes");
  Table t(header);
  for (std::size_t i = 0; i < shown; ++i) {
    const store::OpStat& op = ops[i];
    const auto ns = [](std::int64_t v) { return format_ns(static_cast<double>(v)); };
    std::vector<std::string> row = {op.name, std::to_string(op.calls), ns(op.self_cpu_ns),
                                    ns(op.total_cpu_ns), ns(op.self_cuda_ns),
                                    ns(op.total_cuda_ns)};
    if (shapes) row.push_back(op.input_shapes);
    t.add(std::move(row));
  }
  t.print(std::cout);
  std::cout << "times are sums over the profiled steps; self = total minus the operators "
               "called inside it\n";
  if (const store::RunFile* trace = trace_file(run)) print_trace_hint(*trace);
  return kExitOk;
}

int handle_show(const Args& args, const Global& global) {
  const std::int64_t id = parse_integer(args.positionals[0], "RUN_ID", 1);
  if (args.has("--top") && !args.has("--ops"))
    throw Error("--top applies to --ops", "run 'runner show " + args.positionals[0] +
                                              " --ops --top N'");
  const std::int64_t top = parse_integer(args.get("--top", "20"), "--top", 1);
  const store::Store db = store::Store::open_read_only(global.db);
  const auto run = db.get_run(id);
  if (!run)
    throw Error("run " + std::to_string(id) + " is not in " + global.db.string(),
                "run 'runner runs' to list the recorded runs");
  if (args.has("--ops")) return print_ops(db, *run, top);
  const auto& r = run->row;
  // trial:N as compare and report take it back.
  std::cout << "run " << r.id << "  " << terminal_safe(r.experiment) << "  (" << r.kind
            << ", trial:" << r.trial_id << ", repeat " << r.repeat_index << ")\n";
  if (!r.label.empty()) std::cout << "trial:    " << terminal_safe(r.label) << "\n";
  if (!run->labels.empty()) std::cout << "labels:   " << labels_text(run->labels) << "\n";
  std::cout << "status:   " << r.status << "\n"
            << "started:  " << terminal_safe(r.started_at) << "\n"
            << "finished: " << (r.finished_at.empty() ? "-" : terminal_safe(r.finished_at)) << "\n"
            << "seed:     " << run->seed << "\n"
            << "load:     " << format_number(run->load_average) << " (1-minute average at start)\n"
            << "samples:  " << run->sample_count << "\n"
            << "config:   " << terminal_safe(run->config_hash) << "\n  "
            << terminal_safe(run->config_json) << "\n";
  if (!run->error.empty()) std::cout << "error:    " << terminal_safe(run->error) << "\n";

  if (!run->summaries.empty()) {
    std::cout << "\n";
    Table t({"metric", "n", "mean", "cv", "min", "p5", "p50", "p95", "p99", "max"});
    for (const auto& s : run->summaries) {
      auto f = [&](double v) { return s.unit == "ns" ? format_ns(v) : format_number(v); };
      t.add({s.metric, std::to_string(s.n), f(s.mean), format_number(s.cv * 100) + "%", f(s.min),
             f(s.p5), f(s.p50), f(s.p95), f(s.p99), f(s.max)});
    }
    t.print(std::cout);
    for (const auto& s : run->summaries)
      if (const std::string noisy = store::noise_warning(s); !noisy.empty() &&
          s.metric == headline_metric(run->row.kind))
        std::cout << "warning: " << noisy << "\n";
  }
  if (const auto steps = profiled_steps(*run)) {
    std::cout << "note: " << *steps << " profiled step(s) excluded from the statistics";
    if (const store::RunFile* trace = trace_file(*run))
      std::cout << "; trace " << terminal_safe(trace->path);
    std::cout << " ('runner show " << r.id << " --ops' for the operators)\n";
  }
  if (!run->metrics.empty()) {
    std::cout << "\n";
    Table t({"metric", "value", "unit"});
    for (const auto& m : run->metrics) t.add({m.name, format_number(m.value), m.unit});
    t.print(std::cout);
  }
  if (!run->files.empty()) {
    std::cout << "\n";
    Table t({"file", "sha256", "bytes", "path"});
    for (const auto& f : run->files)
      t.add({f.role, f.sha256.substr(0, 16), std::to_string(f.bytes), f.path});
    t.print(std::cout);
    // strict = false: what the load left out, so a partial start is never silent.
    for (const auto& f : run->files)
      if (!f.skipped.empty())
        std::cout << f.role << " skipped (strict = false): "
                  << terminal_safe(replace_all(f.skipped, "\n", ", ")) << "\n";
  }
  if (!run->attributes.empty()) {
    std::cout << "\n";
    Table t({"attribute", "value"});
    for (const auto& a : run->attributes) t.add({a.name, terminal_safe(a.value)});
    t.print(std::cout);
  }
  if (!run->evaluations.empty()) {
    std::cout << "\n";
    evaluation_table(run->evaluations).print(std::cout);
  }
  if (!run->plugins.empty()) {
    std::cout << "\n";
    Table t({"kind", "plugin", "version", "sha256", "library"});
    for (const auto& p : run->plugins)
      t.add({p.kind, p.name, p.version, p.sha256.substr(0, 16), p.library});
    t.print(std::cout);
  }
  // A run may be recorded without a fingerprint (runs.fingerprint_id NULL).
  if (run->fingerprint_json.empty()) {
    std::cout << "\nfingerprint: none recorded\n";
    return kExitOk;
  }
  std::cout << "\nfingerprint " << terminal_safe(run->fingerprint_hash.substr(0, 16))
            << (args.has("--full") ? "" : " (--full for every field)") << "\n";
  for (const auto& [key, value] : parse_json_object(run->fingerprint_json)) {
    if (!args.has("--full") && !headline_field(key)) continue;
    std::cout << "  " << terminal_safe(key) << " = " << terminal_safe(value) << "\n";
  }
  return kExitOk;
}

}  // namespace

Command show_command() {
  CommandDef def;
  def.name = "show";
  def.summary =
      "show one run: status, statistics, metrics, weights, evaluations, plugins, fingerprint";
  def.usage = "runner show RUN_ID [options]";
  def.positionals = {"RUN_ID"};
  def.options = {{"--full", "", "print every fingerprint field", false},
                 {"--ops", "", "the operators of the profiled steps ([profile] steps)", false},
                 {"--top", "N", "with --ops: the N operators with the most self CPU time "
                                "(default 20)", false}};
  return {def, &handle_show};
}

}  // namespace runner::cli
