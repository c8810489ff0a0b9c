// The layout of a launched job (torchrun, a SLURM step, a PyTorchJob): which
// host and node every rank runs on. Rank 0 gathers each rank's own account
// before a run and records it in the run's fingerprint, so two runs on
// different node layouts never look alike.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace runner {

/// Where one rank of a launched job runs, as that rank reported it.
struct RankPlace {
  int rank = 0;
  std::string host;           ///< its host name
  int node = -1;              ///< the launcher's node rank (GROUP_RANK); -1: unknown
  int local_rank = -1;        ///< LOCAL_RANK
  int local_world_size = -1;  ///< LOCAL_WORLD_SIZE; -1: unknown
};

/// `place` as one line of JSON (what a rank publishes).
[[nodiscard]] std::string rank_place_json(const RankPlace& place);
/// The place a rank published; throws runner::Error (run kind) when `json`
/// is not one.
[[nodiscard]] RankPlace rank_place_from_json(const std::string& json);

/// The fingerprint fields of a job of `world_size` ranks: "job.world_size",
/// "job.nodes" and per node "job.node.<n>" = "host H, ranks 0-3, local world
/// size 4". Nodes are the launcher's node ranks; where a rank has none, the
/// ranks are grouped by host, numbered in the order of their first rank. A
/// rank missing from `places` is listed in "job.unreported_ranks".
[[nodiscard]] std::map<std::string, std::string> job_layout_fields(
    const std::vector<RankPlace>& places, int world_size);

}  // namespace runner
