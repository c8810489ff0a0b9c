// Profiler traces ([profile] steps, docs/profiling.md): steps recorded under
// LibTorch's profiler after the warm-up, their Chrome trace written next to
// the database and their operators aggregated for the store. No LibTorch in
// this header: the profiler's headers stay in profile.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runner/engine/engine.hpp"
#include "runner/store/store.hpp"

namespace runner {

/// Where the traces of the runs recorded in database `db` go: the folder
/// "<db file name>.traces" next to it.
[[nodiscard]] std::filesystem::path trace_directory(const std::filesystem::path& db);

/// The trace file of the run with `uuid` recorded in `db`.
[[nodiscard]] std::filesystem::path trace_path(const std::filesystem::path& db,
                                               const std::string& uuid);

/// Creates trace_directory(db) when absent and checks that it takes new
/// files; throws runner::Error (input) naming the folder and the OS reason.
/// Called before any run of an experiment that profiles.
void prepare_trace_directory(const std::filesystem::path& db);

/// One event of a profile, as the aggregation reads it.
struct ProfiledEvent {
  std::string name;
  std::string input_shapes;     ///< "[[64, 784], [256, 784], [256]]" when recorded; else empty
  std::uint64_t thread = 0;     ///< the thread it started on (CPU events)
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  bool on_cuda = false;         ///< a kernel or copy on a CUDA device, else a CPU event
  std::uint64_t correlation = 0;  ///< CPU events: their correlation id (0: none)
  std::uint64_t linked = 0;       ///< CUDA events: the correlation id of the CPU event that launched them
};

/// Operators by name (and input shapes): calls and total CPU time of the CPU
/// events; self CPU time, the total minus the total of the events directly
/// nested in it on the same thread (nesting by interval containment); CUDA
/// time of the kernels each CPU event launched (self) and of those its
/// nested events launched (total). Sorted as Store::run_ops returns them.
[[nodiscard]] std::vector<store::OpStat> aggregate_ops(const std::vector<ProfiledEvent>& events);

/// Records steps under LibTorch's profiler (Kineto): the step loop calls
/// start() before the first profiled step, begin_step() / end_step() around
/// each (outside their timing) and finish() after the last.
class StepProfiler {
 public:
  /// `steps` > 0 profiled steps; CUDA activity too when `cuda`; the trace is
  /// written to `trace` (its folder must exist).
  StepProfiler(std::int64_t steps, bool record_shapes, bool cuda, std::filesystem::path trace);
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;
  ~StepProfiler();  ///< stops a profiler still running (a run that failed mid-way)

  [[nodiscard]] std::int64_t steps() const { return steps_; }
  /// Enables the profiler.
  void start();
  /// Marks a profiled step in the trace ("runner::step").
  void begin_step(std::int64_t step);
  void end_step();
  /// Disables the profiler, writes the trace (a temporary file renamed into
  /// place), and adds to `out` the operators, the trace file (role
  /// "profile_trace") and the metric profiled_steps (`done` steps).
  void finish(std::int64_t done, RunOutcome& out);

 private:
  struct State;
  std::int64_t steps_;
  bool record_shapes_;
  bool cuda_;
  std::filesystem::path trace_;
  std::unique_ptr<State> state_;
};

}  // namespace runner
