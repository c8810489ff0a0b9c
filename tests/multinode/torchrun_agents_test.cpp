// One data-parallel run across two "nodes": two torchrun agents on this
// host (--nnodes 2 --nproc-per-node 2, c10d rendezvous on 127.0.0.1), each
// with its own node rank, run experiments/data_parallel.toml at world size
// 4. What they must show: one recorded run per repetition with the losses of
// one agent's world-size-4 run and every node's host and ranks in the
// fingerprint; a node lost mid-run fails that run naming it, ends the job
// and leaves the rest for a restart; torchrun's own restart after a killed
// worker records each run once. Every wait is on something observable, with
// a deadline.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <string>

#include "agents.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace runner::test;

class TorchrunAgentsTest : public CliTestBase {
 protected:
  TorchrunAgentsTest() : CliTestBase("runner-multinode-"), port_(free_port()) {}

  void SetUp() override {
    if (find_torchrun().empty())
      GTEST_SKIP() << "no torchrun: the set-up's venv (~/.cache/runner/venv-torch-*/bin/torchrun) "
                      "is missing; scripts/dev setup installs it";
  }

  void TearDown() override {
    for (pid_t pid : started_) kill_tree(pid);  // none left when a test passed
  }

  // The shrunk experiment: `steps` steps a run, `repeats` repetitions, 4 ranks.
  static std::vector<std::string> shrunk(int steps, int repeats) {
    return {"train.steps=" + std::to_string(steps), "train.warmup=2",
            "experiment.repeats=" + std::to_string(repeats), "distributed.world_size=4",
            "distributed.timeout=10s"};
  }

  // Starts node `node`'s agent of a job of `nnodes` nodes (1: standalone, 4 processes).
  pid_t agent(int node, const fs::path& db, const std::vector<std::string>& set,
              int max_restarts = 0, int nnodes = 2, const std::string& tag = "") {
    AgentSpec spec;
    spec.endpoint = "127.0.0.1:" + std::to_string(port_);
    spec.rdzv_id = "runner-test-" + std::to_string(port_) + tag;
    spec.nnodes = nnodes;
    spec.nproc_per_node = 4 / nnodes;
    spec.max_restarts = max_restarts;
    spec.db = db;
    spec.set = set;
    spec.out = dir_ / ("out." + std::to_string(node) + tag);
    spec.err = dir_ / ("err." + std::to_string(node) + tag);
    const pid_t pid = start_agent(spec);
    started_.push_back(pid);
    return pid;
  }

  std::string err(int node, const std::string& tag = "") const {
    return slurp(dir_ / ("err." + std::to_string(node) + tag));
  }

  // Waits until rank 0 reports a step of its first run before the last one
  // (progress comes every 2 s): the run is training, and not about to end.
  void wait_for_training(const std::vector<int>& nodes) {
    const std::regex progress(R"(\[1/\d+\] run 1 .* step (\d+)/(\d+))");
    const bool seen = [&] {
      bool found = false;
      wait_until(in(120), [&] {
        for (int node : nodes) {
          const std::string text = err(node);
          for (std::sregex_iterator it(text.begin(), text.end(), progress), end; it != end; ++it)
            if (std::stoi((*it)[1]) < std::stoi((*it)[2])) found = true;
        }
        return found;
      });
      return found;
    }();
    ASSERT_TRUE(seen) << "no progress of run 1 before its end: " << err(0) << err(1);
  }

  static std::chrono::steady_clock::time_point in(int seconds) {
    return std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  }

  int port_;
  std::vector<pid_t> started_;
};

TEST_F(TorchrunAgentsTest, TwoAgentsRecordOneRunPerRepetitionWithTheLossesOfOneAgent) {
  const std::vector<pid_t> two{agent(0, db_, shrunk(20, 2)), agent(1, db_, shrunk(20, 2))};
  EXPECT_EQ(wait_all(two, in(120)), (std::vector<int>{0, 0})) << err(0) << err(1);
  // 2 trials (comm_hook.plugin swept) x 2 repetitions, each once.
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs"), 4);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 4);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM (SELECT DISTINCT trial_id, repeat_index FROM runs)"),
            4);
  EXPECT_EQ(query_int(db_,
                      "SELECT min(CAST(value AS INTEGER)) FROM metrics WHERE name = "
                      "'ranks_reporting_times'"),
            4);
  // Every node's host and ranks, in every run's fingerprint.
  const std::string host = host_name();
  EXPECT_EQ(job_fields(db_, 1), "job.node.0=host " + host +
                                    ", ranks 0-1, local world size 2\n"
                                    "job.node.1=host " + host +
                                    ", ranks 2-3, local world size 2\n"
                                    "job.nodes=2\njob.world_size=4");
  EXPECT_EQ(job_fields(db_, 4), job_fields(db_, 1));

  // One agent of 4 processes, same seeds: the same loss at every step.
  const fs::path single = dir_ / "single.db";
  EXPECT_EQ(wait_all({agent(0, single, shrunk(20, 2), 0, 1, ".single")}, in(120)),
            (std::vector<int>{0}))
      << err(0, ".single");
  const std::string losses = recorded_losses(db_);
  EXPECT_EQ(std::count(losses.begin(), losses.end(), '\n'), 4 * 22 - 1);
  EXPECT_EQ(losses, recorded_losses(single));
  EXPECT_EQ(job_fields(single, 1),
            "job.node.0=host " + host + ", ranks 0-3, local world size 4\njob.nodes=1\n"
                                        "job.world_size=4");
}

TEST_F(TorchrunAgentsTest, ALostNodeFailsItsRunNamingItEndsTheJobAndARestartResumes) {
  const auto set = shrunk(1500, 1);
  const std::vector<pid_t> agents{agent(0, db_, set), agent(1, db_, set)};
  wait_for_training({0, 1});
  // The node that does not hold rank 0 (the one that records) is lost.
  std::size_t lost = 1;
  wait_until(in(30), [&] { return workers_of(agents[0]).size() + workers_of(agents[1]).size() == 4; });
  if (workers_of(agents[1]).count(0) != 0) lost = 0;
  const auto workers = workers_of(agents[lost]);
  ASSERT_EQ(workers.size(), 2U);
  const std::string node = environment_of(workers.begin()->second)["GROUP_RANK"];
  const int first = workers.begin()->first;
  const auto killed_at = std::chrono::steady_clock::now();
  kill_tree(agents[lost]);
  const auto codes = wait_all(agents, in(150));
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(120));
  EXPECT_EQ(codes[lost], 128 + SIGKILL);
  EXPECT_EQ(codes[1 - lost], 1) << err(0) << err(1);

  // The run in flight: failed, naming the node and its ranks.
  const std::string error = query_text(db_, "SELECT error FROM runs WHERE id = 1");
  const std::string expected = "lost node " + node + " (host " + host_name() + ": ranks " +
                               std::to_string(first) + ", " + std::to_string(first + 1) +
                               ", pids ";
  EXPECT_EQ(query_text(db_, "SELECT status FROM runs WHERE id = 1"), "failed");
  EXPECT_EQ(error.substr(0, expected.size()), expected) << error;
  EXPECT_NE(error.find("no heartbeat for 1.5 s (killed, or its machine is unreachable)"),
            std::string::npos)
      << error;
  // The next one was not started: either never claimed (torchrun stopped
  // rank 0 first, its other worker having failed) or claimed and left
  // interrupted for a restart, saying why.
  const std::int64_t runs = query_int(db_, "SELECT count(*) FROM runs");
  EXPECT_TRUE(runs == 1 || runs == 2) << runs;
  if (runs == 2) {
    EXPECT_EQ(query_text(db_, "SELECT status FROM runs WHERE id = 2"), "interrupted");
    EXPECT_EQ(query_text(db_, "SELECT error FROM runs WHERE id = 2")
                  .rfind("not run: the job lost node " + node + " (host ", 0),
              0U)
        << query_text(db_, "SELECT error FROM runs WHERE id = 2");
  }

  // The same job again: the missing run runs, the failed one is kept.
  const std::vector<pid_t> again{agent(0, db_, set, 0, 2, ".again"),
                                 agent(1, db_, set, 0, 2, ".again")};
  EXPECT_EQ(wait_all(again, in(120)), (std::vector<int>{0, 0}))
      << err(0, ".again") << err(1, ".again");
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs"), runs + 1);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'failed'"), 1);
  EXPECT_EQ(query_int(db_, "SELECT count(DISTINCT trial_id) FROM runs WHERE status IN "
                           "('finished', 'failed')"),
            2);
}

TEST_F(TorchrunAgentsTest, ARestartAfterAKilledWorkerRecordsEachRunOnce) {
  const auto set = shrunk(1500, 1);
  const std::vector<pid_t> agents{agent(0, db_, set, 1), agent(1, db_, set, 1)};
  wait_for_training({0, 1});
  // One worker of the node without rank 0: torchrun restarts the whole group.
  pid_t victim = 0;
  for (pid_t a : agents)
    for (const auto& [rank, pid] : workers_of(a))
      if (rank == 2) victim = pid;
  ASSERT_NE(victim, 0);
  ::kill(victim, SIGKILL);
  EXPECT_EQ(wait_all(agents, in(170)), (std::vector<int>{0, 0})) << err(0) << err(1);
  // The restarted group (its keys under runner/1/) resumed rather than
  // starting over: each of the 2 runs has one final record, and the run
  // the kill broke is either that record (failed) or was rerun once.
  EXPECT_EQ(query_int(db_,
                      "SELECT max(n) FROM (SELECT count(*) AS n FROM runs WHERE status IN "
                      "('finished', 'failed') GROUP BY trial_id, repeat_index)"),
            1);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM (SELECT DISTINCT trial_id, repeat_index FROM runs "
                           "WHERE status IN ('finished', 'failed'))"),
            2);
  EXPECT_GE(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
  // The group ran twice: rank 1 followed a rank 0 in each.
  const std::string all = err(0) + err(1);
  std::size_t follows = 0;
  for (auto at = all.find("rank 1 of 4: following"); at != std::string::npos;
       at = all.find("rank 1 of 4: following", at + 1))
    ++follows;
  EXPECT_EQ(follows, 2U) << all;
}

}  // namespace
