// A launched job: the ranks are started by a launcher (torchrun, a SLURM
// step, a PyTorchJob), not by runner, and meet through the TCPStore rank 0's
// runner serves at MASTER_ADDR:MASTER_PORT. Here every rank is a `runner run`
// started with the torchrun environment (and, when the oracle's Python has
// torch, by torchrun itself as two "nodes" of two processes on loopback).
// Faults: a rank killed, a rank that throws, a rank that never comes, a
// wrong port. Every wait has a deadline: nothing may hang.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::query_int;
using runner::test::query_text;
using runner::test::slurp;

// A TCP port nothing listens on now (the kernel's choice).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

class LaunchCliTest : public runner::test::CliTestBase {
 protected:
  LaunchCliTest() : CliTestBase("runner-launch-"), port_(free_port()) {}

  // Starts rank `rank` of `world` as a launcher would. Rank 0 records into
  // db_; the others are given another database, which they must not create.
  pid_t start(int rank, int world, const fs::path& file, int port = 0) {
    const std::string env = "env RANK=" + std::to_string(rank) +
                            " WORLD_SIZE=" + std::to_string(world) +
                            " LOCAL_RANK=" + std::to_string(rank) +
                            " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                            std::to_string(port == 0 ? port_ : port) + " GLOO_SOCKET_IFNAME=lo ";
    const fs::path db = rank == 0 ? db_ : dir_ / "follower.db";
    const std::string command =
        env + runner::test::runner_command("run " + file.string(),
                                           {db, runner::test::test_plugins("good")}) +
        " > " + (dir_ / ("out." + std::to_string(rank))).string() + " 2> " +
        (dir_ / ("err." + std::to_string(rank))).string();
    return runner::test::spawn(command);
  }

  // Exit codes of `pids`, each waited for until `deadline`; a process still
  // running then is killed and counts as -1 (the test fails: it hung).
  static std::vector<int> wait_all(const std::vector<pid_t>& pids,
                                   std::chrono::steady_clock::time_point deadline) {
    std::vector<int> codes(pids.size(), -2);
    runner::test::wait_until(deadline, [&] {
      bool all = true;
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (codes[i] != -2) continue;
        int status = 0;
        if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
          codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        } else {
          all = false;
        }
      }
      return all;
    });
    for (std::size_t i = 0; i < pids.size(); ++i)
      if (codes[i] == -2) {
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
        codes[i] = -1;
      }
    return codes;
  }

  std::string err(int rank) const { return slurp(dir_ / ("err." + std::to_string(rank))); }

  fs::path experiment(int world, const std::string& model = "", int steps = 30) {
    return write("job.toml", runner::test::tiny_experiment(
                                 {.model = model,
                                  .steps = steps,
                                  .warmup = 2,
                                  .rest = "[experiment]\nname = \"job\"\n"
                                          "[distributed]\nworld_size = " +
                                          std::to_string(world) + "\ntimeout = \"5s\"\n"}));
  }

  static std::chrono::steady_clock::time_point in(int seconds) {
    return std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  }

  int port_;
};

TEST_F(LaunchCliTest, RanksStartedByALauncherTrainTogetherAndOnlyRankZeroRecords) {
  const fs::path file = experiment(3);
  const std::vector<pid_t> pids{start(0, 3, file), start(1, 3, file), start(2, 3, file)};
  const auto codes = wait_all(pids, in(120));
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0})) << err(0) << err(1) << err(2);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
  EXPECT_EQ(query_int(db_, "SELECT CAST(value AS INTEGER) FROM metrics WHERE name = 'world_size'"), 3);
  EXPECT_EQ(query_int(db_,
                      "SELECT CAST(value AS INTEGER) FROM metrics WHERE name = 'ranks_reporting_times'"),
            3);
  EXPECT_EQ(query_int(db_, "SELECT n FROM summaries WHERE metric = 'straggler_ratio'"), 30);
  EXPECT_FALSE(fs::exists(dir_ / "follower.db"));
  EXPECT_NE(err(1).find("rank 1 of 3: following rank 0 at 127.0.0.1:" + std::to_string(port_)),
            std::string::npos)
      << err(1);
  EXPECT_NE(err(2).find("rank 2: "), std::string::npos) << err(2);
}

TEST_F(LaunchCliTest, AKilledRankFailsTheRunNamingItsHostAndNothingHangs) {
  const fs::path file = experiment(3, "kill_at_step = 5\nfail_rank = 2\n");
  const std::vector<pid_t> pids{start(0, 3, file), start(1, 3, file), start(2, 3, file)};
  const auto codes = wait_all(pids, in(120));
  EXPECT_EQ(codes, (std::vector<int>{1, 1, 1})) << err(0) << err(1) << err(2);
  const std::string error = query_text(db_, "SELECT error FROM runs");
  const std::string expected = "lost rank 2 (host " + host_name() + ", pid ";
  EXPECT_EQ(error.substr(0, expected.size()), expected) << error;
  EXPECT_EQ(query_text(db_, "SELECT status FROM runs"), "failed");
}

TEST_F(LaunchCliTest, AThrowingRankFailsTheRunNamingItAndItsException) {
  const fs::path file = experiment(3, "throw_at_step = 5\nfail_rank = 1\n");
  const std::vector<pid_t> pids{start(0, 3, file), start(1, 3, file), start(2, 3, file)};
  const auto codes = wait_all(pids, in(120));
  EXPECT_EQ(codes, (std::vector<int>{1, 1, 1})) << err(0) << err(1) << err(2);
  const std::string error = query_text(db_, "SELECT error FROM runs");
  const std::string expected = "rank 1 (host " + host_name() + ", pid ";
  EXPECT_EQ(error.substr(0, expected.size()), expected) << error;
  EXPECT_NE(error.find(") failed: model plugin 'tiny_linear'"), std::string::npos) << error;
}

TEST_F(LaunchCliTest, ARankThatNeverComesTimesTheRendezvousOut) {
  const fs::path file = experiment(3);
  const std::vector<pid_t> pids{start(0, 3, file), start(1, 3, file)};  // no rank 2
  const auto codes = wait_all(pids, in(60));
  EXPECT_EQ(codes, (std::vector<int>{1, 1})) << err(0) << err(1);
  const std::string error = query_text(db_, "SELECT error FROM runs");
  const std::string expected = "the rendezvous timed out after 5 s: rank 2 of 3 never joined";
  EXPECT_EQ(error.substr(0, expected.size()), expected) << error;
}

TEST_F(LaunchCliTest, AWrongPortIsAClearErrorAfterTheTimeout) {
  const fs::path file = experiment(2);
  const int nobody = free_port();
  const auto codes = wait_all({start(1, 2, file, nobody)}, in(60));
  EXPECT_EQ(codes, (std::vector<int>{1})) << err(1);
  EXPECT_NE(err(1).find("rank 1 cannot reach the rendezvous store at 127.0.0.1:" +
                        std::to_string(nobody) + " within 5 s"),
            std::string::npos)
      << err(1);
}

TEST_F(LaunchCliTest, AWorldSizeOtherThanTheJobsIsRefusedAtItsValue) {
  const fs::path file = experiment(2);
  const auto codes = wait_all({start(0, 3, file)}, in(60));
  EXPECT_EQ(codes, (std::vector<int>{2})) << err(0);
  const std::string expected = "error: " + file.string() + ":" +
                               runner::test::value_position(file, "world_size = 2") +
                               ": trial 1 has distributed.world_size = 2, but the launched job "
                               "has 3 ranks (WORLD_SIZE)";
  EXPECT_EQ(err(0).substr(0, expected.size()), expected) << err(0);
  EXPECT_FALSE(fs::exists(db_));
}

// torchrun itself: two "nodes" (two launches of two processes each, node
// ranks 0 and 1, static rendezvous on loopback). Its agent serves the store
// (TORCHELASTIC_USE_AGENT_STORE), so every rank of runner is its client.
TEST_F(LaunchCliTest, TorchrunOnTwoNodesOfTwoProcesses) {
  RUNNER_REQUIRE_ORACLE("torch");
  const fs::path file = experiment(4);
  std::vector<pid_t> pids;
  for (int node = 0; node < 2; ++node) {
    const std::string command =
        "env GLOO_SOCKET_IFNAME=lo " + runner::test::oracle_python().string() +
        " -m torch.distributed.run --nnodes 2 --node-rank " + std::to_string(node) +
        " --nproc-per-node 2 --master-addr 127.0.0.1 --master-port " + std::to_string(port_) +
        " --no-python " +
        runner::test::runner_command("run " + file.string(),
                                     {node == 0 ? db_ : dir_ / "follower.db",
                                      runner::test::test_plugins("good")}) +
        " > " + (dir_ / ("out." + std::to_string(node))).string() + " 2> " +
        (dir_ / ("err." + std::to_string(node))).string();
    pids.push_back(runner::test::spawn(command));
  }
  const auto codes = wait_all(pids, in(180));
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << err(0) << err(1);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
  EXPECT_EQ(query_int(db_,
                      "SELECT CAST(value AS INTEGER) FROM metrics WHERE name = 'ranks_reporting_times'"),
            4);
  EXPECT_FALSE(fs::exists(dir_ / "follower.db"));
}

}  // namespace
