// A launched job (torchrun, a SLURM step, a Kubernetes PyTorchJob): every
// process of the job runs `runner run` on the same experiment files with
// the same options. Rank 0 is the runner that plans, runs and records (the
// only one that opens the database); before each [distributed] run it
// announces the run, and the other ranks, which follow (follow_job), join
// it as ranks 1..N-1. No LibTorch here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runner/engine/ranks.hpp"
#include "runner/scheduler/scheduler.hpp"

namespace runner {

/// Rank 0's side: announces each [distributed] run (SchedulerOptions::
/// announce) and, when destroyed, the end of the job.
class JobAnnouncer {
 public:
  /// Serves the job's store (see JobChannel); `timeout` is the rendezvous timeout.
  JobAnnouncer(const JobEnvironment& job, std::chrono::milliseconds timeout);
  ~JobAnnouncer();
  JobAnnouncer(const JobAnnouncer&) = delete;
  JobAnnouncer& operator=(const JobAnnouncer&) = delete;

  /// For SchedulerOptions::announce. Leaves the job's node layout in the
  /// run's keys for its fingerprint (gathered before the first run). Throws
  /// runner::Error (run kind) when the previous run lost ranks: the job
  /// cannot go on, and a restarted job runs what is missing.
  Rendezvous announce(std::size_t experiment, std::size_t trial, std::int64_t repeat,
                      const Trial& which);

 private:
  JobChannel channel_;
  std::chrono::milliseconds timeout_;
  int world_size_ = 1;
  std::int64_t next_ = 0;
  std::string layout_;  // JSON of the layout's fingerprint fields; "" before the first run
  int lost_ = 0;        // ranks lost: they will not read the end
};

/// Ranks 1..N-1: until rank 0 announces the end, joins each run it
/// announces, each in a child process. Every line of what happens goes to
/// `say`. Returns the exit code: 0 when every run this rank joined ended
/// normally, 1 when one failed here, 2 when rank 0's runs are not the
/// trials of this rank's files (the files or --set differ), 3 when rank 0
/// was lost.
[[nodiscard]] int follow_job(const JobEnvironment& job, const Sweep& sweep,
                             std::chrono::milliseconds timeout,
                             const std::function<void(const std::string&)>& say,
                             const std::atomic<bool>* stop);

}  // namespace runner
