// Two torchrun agents, each in a network namespace of its own with its own
// address on a veth pair, so that the c10d rendezvous, the job's store and
// Gloo cross a real interface rather than loopback. Needs root and `ip`
// (iproute2); skipped with the reason where the namespaces cannot be made
// (not root, no CAP_NET_ADMIN, a container that forbids them). The
// namespaces are removed whatever happens.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "agents.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace runner::test;

class NetnsAgentsTest : public CliTestBase {
 protected:
  NetnsAgentsTest() : CliTestBase("runner-netns-") {
    const std::string id = std::to_string(::getpid() % 100000);
    ns_ = {"runner-mn-" + id + "-0", "runner-mn-" + id + "-1"};
    veth_ = {"rmn" + id + "a", "rmn" + id + "b"};
  }

  void SetUp() override {
    if (find_torchrun().empty())
      GTEST_SKIP() << "no torchrun: the set-up's venv (~/.cache/runner/venv-torch-*/bin/torchrun) "
                      "is missing";
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root (ip netns add)";
    if (sh("command -v ip") != 0)
      GTEST_SKIP() << "no `ip` command: install iproute2 for the network namespace tests";
    if (sh("ip netns add " + ns_[0]) != 0)
      GTEST_SKIP() << "cannot make a network namespace here (no CAP_NET_ADMIN, or a container "
                      "that forbids it): " << last_output_;
    made_ = true;
    const std::string address[2] = {"10.77.0.1/24", "10.77.0.2/24"};  // see the test
    ASSERT_EQ(sh("ip netns add " + ns_[1]), 0) << last_output_;
    ASSERT_EQ(sh("ip link add " + veth_[0] + " type veth peer name " + veth_[1]), 0)
        << last_output_;
    for (int n = 0; n < 2; ++n) {
      ASSERT_EQ(sh("ip link set " + veth_[n] + " netns " + ns_[n]), 0) << last_output_;
      ASSERT_EQ(sh("ip -n " + ns_[n] + " addr add " + address[n] + " dev " + veth_[n]), 0)
          << last_output_;
      ASSERT_EQ(sh("ip -n " + ns_[n] + " link set " + veth_[n] + " up"), 0) << last_output_;
      ASSERT_EQ(sh("ip -n " + ns_[n] + " link set lo up"), 0) << last_output_;
    }
  }

  void TearDown() override {
    for (pid_t pid : started_) kill_tree(pid);
    if (!made_) return;
    // Deleting a namespace deletes its end of the veth pair, and the pair with it.
    for (const auto& ns : ns_) (void)sh("ip netns del " + ns);
    EXPECT_NE(sh("ip netns list | grep -q " + ns_[0]), 0) << "namespace left behind";
  }

  // Runs `command` through the shell; its output is kept in last_output_.
  int sh(const std::string& command) {
    const fs::path out = dir_ / "sh.out";
    const int status = std::system((command + " > " + out.string() + " 2>&1").c_str());
    last_output_ = slurp(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string err(int node) const { return slurp(dir_ / ("err." + std::to_string(node))); }

  std::vector<std::string> ns_, veth_;
  bool made_ = false;
  std::string last_output_;
  std::vector<pid_t> started_;
};

TEST_F(NetnsAgentsTest, TwoAgentsInTwoNamespacesTrainOverAVethPair) {
  std::vector<pid_t> agents;
  for (int n = 0; n < 2; ++n) {
    AgentSpec spec;
    spec.prefix = "ip netns exec " + ns_[n];
    spec.endpoint = "10.77.0.1:29500";  // node 0's address: node 1 reaches it over the veth
    spec.rdzv_id = "runner-netns";
    spec.ifname = veth_[n];
    // torchrun guesses which agent serves the rendezvous from the host name,
    // which both namespaces share: node 0 is told.
    spec.rdzv_conf = n == 0 ? "is_host=1" : "is_host=0";
    // And the address its workers' store is reached at (else this host's
    // name, here "localhost": each namespace's own loopback).
    spec.local_addr = n == 0 ? "10.77.0.1" : "10.77.0.2";
    spec.db = db_;
    spec.set = {"train.steps=20", "train.warmup=2", "experiment.repeats=1",
                "distributed.world_size=4", "distributed.timeout=20s"};
    spec.out = dir_ / ("out." + std::to_string(n));
    spec.err = dir_ / ("err." + std::to_string(n));
    agents.push_back(start_agent(spec));
    started_.push_back(agents.back());
  }
  const auto codes =
      wait_all(agents, std::chrono::steady_clock::now() + std::chrono::seconds(120));
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << err(0) << err(1);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 2);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(query_text(db_, "SELECT json_extract(f.json, '$.\"job.nodes\"') FROM runs r JOIN "
                            "fingerprints f ON f.id = r.fingerprint_id WHERE r.id = 1"),
            "2");
  // Node 1's ranks reached the job's store at node 0's address, across the pair.
  EXPECT_NE(err(1).find("of 4: following rank 0 at 10.77.0.1:"), std::string::npos) << err(1);
}

}  // namespace
