// The fingerprint fields of a launched job's layout: nodes by the launcher's
// node rank, or by host where it sets none; ranks that never reported.
#include "runner/fingerprint/node_layout.hpp"

#include <gtest/gtest.h>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using runner::RankPlace;

RankPlace place(int rank, const std::string& host, int node, int local_world_size) {
  RankPlace p;
  p.rank = rank;
  p.host = host;
  p.node = node;
  p.local_rank = node < 0 ? -1 : rank % 2;
  p.local_world_size = local_world_size;
  return p;
}

TEST(JobLayout, EveryNodeItsHostRanksAndLocalWorldSize) {
  // Reported out of order, as ranks join.
  const auto f = runner::job_layout_fields(
      {place(3, "b", 1, 2), place(0, "a", 0, 2), place(2, "b", 1, 2), place(1, "a", 0, 2)}, 4);
  EXPECT_EQ(f, (std::map<std::string, std::string>{
                   {"job.world_size", "4"},
                   {"job.nodes", "2"},
                   {"job.node.0", "host a, ranks 0-1, local world size 2"},
                   {"job.node.1", "host b, ranks 2-3, local world size 2"}}));
}

TEST(JobLayout, WithoutNodeRanksTheHostsAreTheNodes) {
  // A SLURM step or a PyTorchJob: no GROUP_RANK, no LOCAL_WORLD_SIZE.
  const auto f = runner::job_layout_fields(
      {place(0, "x", -1, -1), place(1, "y", -1, -1), place(2, "x", -1, -1)}, 3);
  EXPECT_EQ(f.at("job.nodes"), "2");
  EXPECT_EQ(f.at("job.node.0"), "host x, ranks 0,2, local world size 2");
  EXPECT_EQ(f.at("job.node.1"), "host y, ranks 1, local world size 1");
  EXPECT_EQ(f.count("job.unreported_ranks"), 0U);
}

TEST(JobLayout, RanksThatNeverReportedAreListed) {
  const auto f = runner::job_layout_fields({place(0, "a", 0, 4)}, 4);
  EXPECT_EQ(f.at("job.node.0"), "host a, ranks 0, local world size 4");
  EXPECT_EQ(f.at("job.unreported_ranks"), "1-3");
}

TEST(JobLayout, ANodeRankOnTwoHostsShowsBoth) {
  const auto f = runner::job_layout_fields({place(0, "a", 0, 2), place(1, "b", 0, 2)}, 2);
  EXPECT_EQ(f.at("job.node.0"), "host a b, ranks 0-1, local world size 2");
}

TEST(JobLayout, APlaceRoundTripsThroughItsJson) {
  const RankPlace p = runner::rank_place_from_json(runner::rank_place_json(place(5, "h", 2, 4)));
  EXPECT_EQ(p.rank, 5);
  EXPECT_EQ(p.host, "h");
  EXPECT_EQ(p.node, 2);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.local_world_size, 4);
  EXPECT_THROW_MSG((void)runner::rank_place_from_json("{\"host\": \"h\"}"), runner::Error,
                   "a rank published an unreadable place in the job's store: {\"host\": \"h\"} "
                   "([json.exception.out_of_range.403] key 'rank' not found)");
}

}  // namespace
