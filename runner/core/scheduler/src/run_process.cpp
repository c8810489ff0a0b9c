// What happens inside a run process, and how the scheduler records a run
// process that ended without recording its own verdict.
#include <chrono>
#include <csignal>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "liveness.hpp"
#include "record.hpp"
#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/profile.hpp"
#include "runner/engine/ranks.hpp"
#include "runner/fingerprint/fingerprint.hpp"
#include "runner/process/isolation.hpp"
#include "runner/runtime/runtime.hpp"
#include "runner/scheduler/scheduler.hpp"

namespace runner {

RunOutcome execute_recorded_run(const RunContext& context) {
  const Experiment& exp = context.trial->experiment;
  store::Store& db = *context.db;
  // [runtime] binds the process before LibTorch starts a thread, and every
  // setting is read back before the run measures anything.
  const RuntimeRequest runtime = exp.runtime_request();
  apply_runtime(runtime);
  configure_runtime(exp);
  verify_runtime(runtime);
  std::vector<std::string> env_names;
  for (const auto& [name, value] : exp.env) env_names.push_back(name);
  Fingerprint fingerprint = collect_fingerprint(exp.seed, env_names);
  // A launched job: every node's host and ranks, as rank 0's runner gathered them.
  if (context.job)
    for (const auto& [name, value] : run_layout_fields(*context.job)) fingerprint.fields[name] = value;
  const auto fingerprint_id = db.upsert_fingerprint(fingerprint.hash(), fingerprint.json());
  db.set_run_fingerprint(context.run_id, fingerprint_id);
  // The peak is measured once per fingerprint and device, by the first run
  // that needs it, before its own steps (so it never overlaps a measurement).
  const std::string device = resolve_device(exp.device.type);
  std::optional<double> peak = db.peak_flop_per_s(fingerprint_id, device, "float32");
  if (!peak) {
    // In a child of the run process: the matmuls start LibTorch's thread pool,
    // and a [distributed] run forks its other ranks from this process later
    // (a pool does not survive a fork; see docs/execution.md).
    const std::string text =
        capture_in_child([&] { return std::to_string(measure_peak_flop_per_s(device)); });
    peak = parse_double(text);
    if (!peak || !(*peak > 0))
      throw Error("the peak FLOP/s probe printed '" + text + "', not a positive number", {},
                  ErrorKind::run);
    db.set_peak_flop_per_s(fingerprint_id, device, "float32", *peak,
                           device == "cpu" ? "best of 5 fp32 matmuls 1024^3"
                                           : "best of 5 fp32 matmuls 4096^3");
  }
  // Kernel runs report their bandwidth against the machine's copy bandwidth,
  // measured the same way: once per fingerprint and device, in a child.
  std::optional<double> bandwidth;
  if (exp.kind == RunKind::kernel) {
    bandwidth = db.peak_bytes_per_s(fingerprint_id, device);
    if (!bandwidth) {
      const std::string text =
          capture_in_child([&] { return std::to_string(measure_peak_bytes_per_s(device)); });
      bandwidth = parse_double(text);
      if (!bandwidth || !(*bandwidth > 0))
        throw Error("the copy bandwidth probe printed '" + text + "', not a positive number", {},
                    ErrorKind::run);
      db.set_peak_bytes_per_s(fingerprint_id, device, *bandwidth,
                              device == "cpu" ? "best of 5 copies of 256 MiB (2x bytes)"
                                              : "best of 5 copies of 1 GiB (2x bytes)");
    }
  }
  RunRequest request;
  request.peak_flop_per_s = peak;
  request.peak_bytes_per_s = bandwidth;
  request.experiment = &exp;
  request.host = context.host;
  request.repeat_index = context.repeat;
  request.process_start = context.origin;
  request.stop = context.stop;
  request.on_progress = context.on_progress;
  request.job = context.job;
  if (exp.profile.enabled() && exp.kind != RunKind::kernel && !context.db_path.empty())
    if (const auto run = db.get_run(context.run_id))
      request.profile_trace = trace_path(context.db_path, run->uuid);
  return execute_run(request);
}

void record_outcome(store::Store& db, std::int64_t run_id, const RunOutcome& outcome) {
  db.add_samples(run_id, outcome.samples);
  db.finish_run(run_id, outcome.status, bounded_error(outcome.error), outcome.summaries,
                outcome.metrics, 0, outcome.evaluations, outcome.files, outcome.attributes,
                outcome.ops);
}

std::string bounded_error(std::string text) {
  static constexpr std::string_view kMark = " [...]";
  if (text.size() <= kMaxErrorBytes) return text;
  text.resize(kMaxErrorBytes - kMark.size());
  // Never end in half a UTF-8 sequence: find the last character's lead byte
  // and drop the character if its continuation bytes were cut off.
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t lead = text.size();
  while (lead > 0 && text.size() - lead < 3 && (byte(lead - 1) & 0xC0U) == 0x80U) --lead;
  if (lead > 0) {
    --lead;
    const unsigned char c = byte(lead);
    const std::size_t length = c >= 0xF0U ? 4 : c >= 0xE0U ? 3 : c >= 0xC0U ? 2 : 1;
    if (text.size() - lead < length) text.resize(lead);
  }
  return text.append(kMark);
}

std::string failure_reason(const std::string& what) {
  const std::size_t begin = what.find_first_not_of("\n\r\t ");
  if (begin == std::string::npos) return "unknown error";
  return bounded_error(what.substr(begin, what.find('\n', begin) - begin));
}

std::string run_process_name(const Experiment& experiment, const std::optional<Rendezvous>& job,
                             int pid) {
  if (!experiment.distributed.enabled) return "";
  // The scheduler's child is rank 0 (it forks the others) or, in a launched
  // job, this node's rank; named as the ranks name each other (ranks.cpp).
  const int rank = job ? job->rank : 0;
  const std::int64_t world = job ? job->world_size : experiment.distributed.world_size;
  return "rank " + std::to_string(rank) + " of " + std::to_string(world) + " (host " +
         this_process().host + ", pid " + std::to_string(pid) + ")";
}

namespace {
// The runner's own SIGTERM may trail its run process's by a few milliseconds.
bool stopped_with_runner() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (Interrupts::count() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Interrupts::count() > 0;
}
}  // namespace

void record_child_exit(store::Store& db, std::int64_t run_id, const ChildExit& exit,
                       const Experiment& experiment, const std::optional<Rendezvous>& job,
                       const std::string& reason, const OomKillBaseline& oom) {
  const double timeout_s = experiment.timeout_s;
  const auto run = db.get_run(run_id);
  if (run && run->row.stored_status != store::RunStatus::running) return;  // it recorded its verdict
  switch (exit.kind) {
    case ChildExit::Kind::timed_out:
      db.finish_run(run_id, store::RunStatus::timeout,
                    "exceeded the timeout of " + format_duration(timeout_s) + " and was killed",
                    {}, {});
      break;
    case ChildExit::Kind::interrupted:
      db.mark_interrupted(run_id, "killed by a second interrupt");
      break;
    case ChildExit::Kind::signaled:
      // A scheduler stopping a job (scancel, a time limit) sends SIGTERM to
      // every process of it: the run was interrupted with its runner, not
      // crashed, so that resuming the sweep runs it again (docs/distributed.md).
      if (exit.signal == SIGTERM && stopped_with_runner()) {
        db.mark_interrupted(run_id, "stopped by SIGTERM together with its runner "
                                    "(a scheduler cancelled the job or its time ran out)");
        break;
      }
      db.finish_run(run_id, store::RunStatus::crashed,
                    describe_kill(run_process_name(experiment, job, exit.pid), exit.signal, oom),
                    {}, {}, exit.signal);
      break;
    case ChildExit::Kind::exited:
      db.finish_run(run_id, store::RunStatus::failed,
                    "the run process exited with code " + std::to_string(exit.exit_code) +
                        " before recording a result" + (reason.empty() ? "" : ": " + reason),
                    {}, {});
      break;
  }
}

// "progress STEP TOTAL LOSS STEPS_PER_S DATA_SHARE": how a fresh run process
// reports progress (NaN written as "nan").
std::string progress_line(const Progress& p) {
  std::ostringstream out;
  out.precision(17);
  out << "progress " << p.step << " " << p.total_steps << " " << p.last_loss << " "
      << p.steps_per_s << " " << p.data_share << "\n";
  return out.str();
}

std::optional<Progress> parse_progress_line(const std::string& line) {
  std::istringstream in(line);
  std::string tag, loss, share;
  Progress p;
  if (!(in >> tag >> p.step >> p.total_steps >> loss >> p.steps_per_s >> share) ||
      tag != "progress")
    return std::nullopt;
  const auto nan_or = [](const std::string& text) {
    const auto value = parse_double(text);
    return value ? *value : std::numeric_limits<double>::quiet_NaN();
  };
  p.last_loss = nan_or(loss);
  p.data_share = nan_or(share);
  return p;
}

}  // namespace runner
