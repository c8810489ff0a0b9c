// The engine: runs one repetition of an experiment (train or infer loop) and
// returns what it measured. No LibTorch in this header.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "runner/engine/rendezvous.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// Progress of a run, reported now and then (never on every step).
struct Progress {
  std::int64_t step = 0;          ///< steps done, warm-up included
  std::int64_t total_steps = 0;   ///< warm-up + measured
  /// Mean loss of the latest (up to 10) steps, as loss_final; NaN for infer.
  double last_loss = 0;
  double steps_per_s = 0;         ///< recent throughput
  /// Share of the recent steps' wall time spent waiting for the batch (the
  /// data phase), in [0, 1]; NaN when the steps have no data phase (kernels).
  double data_share = std::numeric_limits<double>::quiet_NaN();
};

/// What to run.
struct RunRequest {
  const Experiment* experiment = nullptr;
  const PluginHost* host = nullptr;
  std::int64_t repeat_index = 0;
  /// When the process started, for time_to_first_step_s.
  std::chrono::steady_clock::time_point process_start = std::chrono::steady_clock::now();
  /// Called at most every two seconds, and at the end.
  std::function<void(const Progress&)> on_progress;
  /// When set and true, the run stops before its next step and ends
  /// "interrupted", keeping what it measured (Ctrl-C).
  const std::atomic<bool>* stop = nullptr;
  /// Measured peak FLOP/s of the device (fp32), for fraction_of_peak.
  std::optional<double> peak_flop_per_s;
  /// Measured copy bandwidth of the device (bytes/s), for a kernel run's
  /// fraction_of_peak_bandwidth.
  std::optional<double> peak_bytes_per_s;
  /// A [distributed] run of a launched job (torchrun): this process is rank
  /// 0 of the group that meets here, and the other ranks are processes of
  /// the job (execute_rank), not started by runner. Unset: runner forks the
  /// ranks itself.
  std::optional<Rendezvous> job;
  /// [profile] steps: the Chrome-trace file the profiled steps are written
  /// to (see profile.hpp; its folder exists). Empty: the operators are
  /// aggregated but no trace is written.
  std::filesystem::path profile_trace;
};

/// What a run produced. status is never running.
struct RunOutcome {
  store::RunStatus status = store::RunStatus::finished;
  std::string error;
  std::vector<store::Sample> samples;
  std::vector<store::Summary> summaries;
  std::vector<store::Metric> metrics;
  std::vector<store::Evaluation> evaluations;  ///< [eval]: every held-out evaluation
  std::vector<store::RunFile> files;           ///< weights read (init_from) and written (save_to)
  /// What the model says it runs (Model::provenance, as "model.KEY").
  std::vector<store::RunAttribute> attributes;
  std::vector<store::OpStat> ops;  ///< [profile]: the operators of the profiled steps
};

/// "cpu" or "cuda" for an experiment's device.type; throws runner::Error
/// (input) when "cuda" is asked for and no CUDA device is available.
[[nodiscard]] std::string resolve_device(const std::string& type);

/// Applies process-wide settings (thread counts) once, before the first run.
void configure_runtime(const Experiment& experiment);

/// Runs one repetition. Plugin and LibTorch failures do not throw: they come
/// back as status "failed" (or "diverged" for a non-finite loss) with the error text.
[[nodiscard]] RunOutcome execute_run(const RunRequest& request);

/// Rank `rendezvous.rank` (> 0) of a [distributed] run of a launched job:
/// builds the same workload, meets the other ranks, runs the steps rank 0
/// runs, posts its step times, and returns "" — or, when it fails, why
/// (also recorded in the run's store for rank 0 to report).
[[nodiscard]] std::string execute_rank(const RunRequest& request, const Rendezvous& rendezvous);

/// Checks, before any run, what only the plugins can tell about
/// (kernel experiments: see check_kernel_before_runs in kernel_run.hpp)
/// `experiment` on `device` (resolved: "cpu" or "cuda"), and throws
/// runner::Error (input) at the file:line:col responsible:
///  - the init_from weights load into its model (the loader and model are
///    built on the CPU and the file loaded by name; the error names the file
///    and every missing, unexpected and mis-shaped name);
///  - the optimizer accepts its options for that device (a plugin's
///    runner::OptionError, e.g. a fused kernel the device lacks) and can
///    follow the training setup (momentum for a one-cycle schedule, parameter groups
///    that amp_fp16 can unscale), built over a stand-in parameter;
///  - model.channels_last has image samples.
/// Touches LibTorch: call it in a child process (capture_in_child) when the
/// calling process forks runs later.
void check_before_runs(const Experiment& experiment, const PluginHost& host,
                       const std::string& device);

/// Peak FLOP/s of a device ("cpu" or "cuda") for fp32 matmul, measured now:
/// the best of five 2n^3 matmuls (n = 1024 on the CPU, 4096 on a GPU).
[[nodiscard]] double measure_peak_flop_per_s(const std::string& device);

/// Copy bandwidth of a device ("cpu" or "cuda"), measured now: the best of
/// five copies between two buffers far larger than the last-level cache
/// (256 MiB each on the CPU, 1 GiB on a GPU), counting each byte read and
/// written (2x the buffer).
[[nodiscard]] double measure_peak_bytes_per_s(const std::string& device);

/// Seed of a repetition: every repetition of a trial repeats the same work.
[[nodiscard]] std::uint64_t run_seed(const Experiment& experiment, std::int64_t repeat_index);

}  // namespace runner
