// One rank's run: seed and device, the workload built, its loop run and
// its figures derived, and what the run measured of the process (memory
// peaks, times). Rank 0 of a data-parallel run records; the others are
// distributed.cpp's workers.
#include "rank_run.hpp"

#include <sys/resource.h>

#include <torch/utils.h>

#include <chrono>
#include <cmath>

#include "device.hpp"
#include "errors.hpp"
#include "loops.hpp"
#include "metrics.hpp"
#include "runner/engine/phase_clock.hpp"
#include "run_memory.hpp"

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// Builds the run's workload, runs its loop and computes its figures (into
// `out`). A failure of this rank's own is recorded in the run's store before
// the workload, and with it the process group, is destroyed: the other ranks
// then read why their collectives broke.
void run_workload(const RunRequest& request, const RankInfo& rank, torch::Device device,
                  std::uint64_t seed, Clock::time_point run_start, RunMemory& memory,
                  RunOutcome& out) {
  const Experiment& exp = *request.experiment;
  const std::string device_name = device.is_cuda() ? "cuda" : "cpu";
  Workload w;
  w.memory = &memory;
  try {
    // Before the training pipeline's workers start allocating batches: the
    // bytes the eval split holds are counted alone, as the data set's.
    if (exp.eval.enabled)
      memory.count_data(
          [&] { w.evaluator = std::make_unique<Evaluator>(exp, *request.host, seed, device); });
    build(w, exp, *request.host, seed, device, rank);
    if (w.init_file) {
      out.files.push_back(*w.init_file);
      out.metrics.push_back({"init_skipped", static_cast<double>(w.skipped.size()), "count"});
    }
    for (auto& file : model_files(exp)) out.files.push_back(std::move(file));
    for (const auto& [key, value] : w.model->provenance())
      out.attributes.push_back({"model." + key, value});
    // Before anything is timed: a path that computes something else fails here.
    if (!exp.model_settings.check_against.empty())
      out.files.push_back(check_outputs(exp, *w.model, *w.setup, device, out.metrics));
    auto clock = make_phase_clock(device_name);
    out.metrics.push_back({"setup_s", seconds_between(run_start, Clock::now()), "s"});
    out.metrics.push_back(
        {"parameters", static_cast<double>(w.model->parameter_count()), "count"});
    if (const auto flops = w.model->flops_per_sample())
      out.metrics.push_back({"flops_per_sample", *flops, "flop"});
    if (exp.kind == RunKind::train) {
      train_loop(request, w, *clock, out);
      summarize(out, "step_time");
    } else {
      infer_loop(request, w, *clock, out);
      summarize(out, "latency");
    }
    const std::int64_t world = rank.world_size();
    add_throughput(out, w.batch_size * w.accumulate * world);  // every micro-batch's samples
    if (w.batches->from_loader())
      add_pipeline_metrics(out, w.batches->pipeline().stats(), w.loader->skipped(),
                           exp.data_settings.on_error == "skip");
    if (w.sync) add_comm_metrics(out, w.comm_steps, w.sync->bucket_count(), world);
    add_model_rate_metrics(out, *w.model, exp.kind == RunKind::train, world,
                           request.peak_flop_per_s);
    // The other ranks stop where rank 0 stopped (they learn it when its
    // process group closes, as this function returns, if not before).
    if (rank.link) rank.link->finish(static_cast<std::int64_t>(out.samples.size()));
  } catch (const Error& e) {
    if (rank.link) rank.link->fail(e.what());
    throw;
  }
}

}  // namespace

RunOutcome run_rank(const RunRequest& request, const RankInfo& rank, bool* own_failure) {
  const Experiment& exp = *request.experiment;
  RunOutcome out;
  out.status = store::RunStatus::finished;
  const auto run_start = Clock::now();
  RunMemory memory;  // counts from here on
  try {
    const std::uint64_t seed = run_seed(exp, request.repeat_index);
    torch::manual_seed(seed);
    const torch::Device device = rank_device(resolve_device(exp.device.type), rank);
    if (device.is_cuda()) memory.add_cuda(device.index() < 0 ? 0 : device.index());
    run_workload(request, rank, device, seed, run_start, memory, out);
    if (rank.link) add_straggler_metrics(out, rank.link->collect_step_times());
  } catch (const Error& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what();
    if (own_failure) *own_failure = true;
    if (rank.link) rank.link->fail(out.error);
  } catch (const std::exception& e) {
    out.status = store::RunStatus::failed;
    out.error = message_of(e);
  }
  out.metrics.push_back({"peak_rss_bytes", peak_rss_bytes(), "B"});
  // Live tensor bytes per device: the loaders' data, and the peaks of the
  // setup and of the measured steps apart (run_memory.hpp).
  memory.add_metrics(out.metrics);
  out.metrics.push_back({"run_s", seconds_between(run_start, Clock::now()), "s"});
  return out;
}

}  // namespace runner
