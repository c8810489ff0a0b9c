// What the ranks of one data-parallel run tell each other outside the
// collectives, through the run's c10d store: who joined (host and pid), who
// is alive (a heartbeat), who failed and why, how many steps rank 0 ran,
// and each rank's step times (for stragglers). Also the torchrun
// environment contract. No LibTorch in this header.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/engine/rendezvous.hpp"

namespace runner {

struct RankPlace;  // runner/fingerprint/node_layout.hpp

/// The torchrun environment contract (also what a SLURM step or a
/// Kubernetes PyTorchJob exports): this process is rank RANK of WORLD_SIZE
/// and rank 0 serves the rendezvous at MASTER_ADDR:MASTER_PORT.
struct JobEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  /// TORCHELASTIC_USE_AGENT_STORE: torchrun's agent already serves a
  /// TCPStore at MASTER_ADDR:MASTER_PORT, and every rank is its client.
  bool agent_store = false;
  /// TORCHELASTIC_RESTART_COUNT, for the key prefix of a restarted job.
  int restart_count = 0;
  /// GROUP_RANK (torchrun's node rank); -1 when the launcher sets none.
  int node_rank = -1;
  /// LOCAL_WORLD_SIZE (the ranks on this node); -1 when the launcher sets none.
  int local_world_size = -1;
};

/// The contract from the environment (`lookup` is getenv): nullopt when
/// none of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT is set.
/// Throws runner::Error (input) when only some are set, or a value is not a
/// number in range, naming the variables and what to do.
[[nodiscard]] std::optional<JobEnvironment> job_environment(
    const std::function<const char*(const char*)>& lookup);

/// The runs of a launched job, announced by rank 0 and followed by the
/// other ranks, through the job's TCPStore: served by rank 0's runner (its
/// main process, which outlives the runs), or by torchrun's agent.
class JobChannel {
 public:
  /// Rank 0 serves the store (unless the agent does) and every rank
  /// connects, within `timeout`. Throws runner::Error (run kind) when the
  /// port cannot be bound or the store cannot be reached.
  JobChannel(const JobEnvironment& job, std::chrono::milliseconds timeout);
  JobChannel(const JobChannel&) = delete;
  JobChannel& operator=(const JobChannel&) = delete;
  ~JobChannel();

  /// Rank 0: run `sequence`'s description (or "end") for the other ranks.
  void announce(std::int64_t sequence, const std::string& text);
  /// The other ranks: says this rank has read the end.
  void acknowledge_end();
  /// Rank 0: waits until every other rank but `lost` ones has read the end
  /// (its store must outlive their last read), at most `timeout`; returns
  /// the ranks that did.
  int wait_for_end(std::chrono::milliseconds timeout, int lost = 0);
  /// The other ranks: run `sequence`'s description, waiting for it as long
  /// as rank 0's store answers; nullopt when `stop` is raised meanwhile.
  /// Throws runner::Error (run kind) when the store is lost.
  [[nodiscard]] std::optional<std::string> next(std::int64_t sequence,
                                                const std::atomic<bool>* stop) const;
  /// Where the ranks of run `sequence` meet: this job's store, the run's keys.
  [[nodiscard]] Rendezvous rendezvous(std::int64_t sequence, std::chrono::milliseconds timeout) const;

  /// Where every rank runs, as each published it when it joined the job,
  /// waiting up to `wait` for all; a rank that has not published is left out.
  [[nodiscard]] std::vector<RankPlace> places(std::chrono::milliseconds wait) const;
  /// Rank 0: run `sequence`'s fingerprint fields of the job's layout (JSON
  /// object of strings), for its run process to record (run_layout_fields).
  void describe_run(std::int64_t sequence, const std::string& layout_json);
  /// The ranks run `sequence` lost (heartbeat stopped, or never joined) and
  /// how its rank 0 named them ("node 1 (ranks 2-3, host h)"); nullopt when
  /// it lost none (RankLink::explain_failure records them).
  [[nodiscard]] std::optional<std::pair<std::vector<int>, std::string>> lost_in_run(
      std::int64_t sequence) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Rank 0's run process: the fingerprint fields of its job's layout that
/// rank 0's runner left in the run's keys (JobChannel::describe_run); empty
/// when there are none.
[[nodiscard]] std::map<std::string, std::string> run_layout_fields(const Rendezvous& rendezvous);

/// Per measured step, across ranks: the slowest rank's step time and the
/// median one (ns); the ratio of the two shows stragglers.
struct StragglerSteps {
  std::vector<double> max_ns, median_ns;
  std::vector<std::int64_t> slowest_rank;  ///< per step
};

/// `per_rank[r][i]` is rank r's wall time of step i; steps where
/// `measured[i]` is false (warm-up) are left out, and so are steps some rank
/// lacks.
[[nodiscard]] StragglerSteps straggler_steps(const std::vector<std::vector<double>>& per_rank,
                                             const std::vector<bool>& measured);

/// One rank's link to the others of its run. Construction connects to the
/// store, publishes this rank's host and pid (and its node, GROUP_RANK, when
/// the launcher sets it), and starts a heartbeat thread (a counter under
/// "alive/<rank>" every `beat`).
class RankLink {
 public:
  RankLink(const Rendezvous& rendezvous,
           std::chrono::milliseconds beat = std::chrono::milliseconds(250));
  RankLink(const RankLink&) = delete;
  RankLink& operator=(const RankLink&) = delete;
  ~RankLink();

  /// "rank 2 (host node-b, pid 4711)", from what that rank published, or
  /// "rank 2" when it never joined.
  [[nodiscard]] std::string describe(int rank) const;

  /// Records why this rank fails, for the others to report.
  void fail(const std::string& reason) noexcept;
  /// After a collective failed: why, as the other ranks see it. The failures
  /// ranks recorded, else the ranks whose heartbeat stopped (watched for a
  /// few beats), else the ranks that never joined; empty when nothing is
  /// known (then the collective's own error is all there is). Ranks lost so
  /// are named by node when their node lost every rank, and recorded for
  /// the job (JobChannel::lost_in_run).
  [[nodiscard]] std::string explain_failure() const;
  /// True when `rank`'s heartbeat stands still for a few beats (or the
  /// store is gone); waits that long.
  [[nodiscard]] bool lost(int rank) const;
  /// Ranks that have not joined yet (published their host).
  [[nodiscard]] std::vector<int> missing_ranks() const;

  /// Rank 0: the run ended after `steps` steps; every rank stops there.
  void finish(std::int64_t steps);
  /// The other ranks: the steps rank 0 ran, once it has finished; nullopt
  /// when it has not within `wait`.
  [[nodiscard]] std::optional<std::int64_t> finished_steps(std::chrono::milliseconds wait) const;
  /// Publishes this rank's step wall times (ns).
  void post_step_times(const std::vector<double>& wall_ns);
  /// Rank 0: every other rank's posted step times, waiting up to the
  /// rendezvous timeout; a rank that posts none in time has an empty list.
  [[nodiscard]] std::vector<std::vector<double>> collect_step_times() const;

 private:
  // `gone` (ranks) named by node where a node lost all its ranks, else each by describe().
  [[nodiscard]] std::vector<std::string> name_lost(const std::vector<int>& gone) const;

  friend struct RankLinkAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runner
