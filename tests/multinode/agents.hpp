// Two torchrun agents on this host as the two nodes of one job: what the
// multi-node tests share. Each agent is started as torchrun would be on its
// own machine (--nnodes 2, c10d rendezvous), optionally inside a command
// prefix (`ip netns exec NS`), and runs experiments/data_parallel.toml shrunk
// by --set so that a run takes about a second. A node is lost by killing the
// agent and everything under it at once (torchrun starts each worker in a
// session of its own, so a signal to the agent's process group alone would
// leave the workers training).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace runner::test {

/// torchrun of the set-up's virtual environment (beside the oracle's
/// python, else ~/.cache/runner/venv-torch-*/bin/torchrun); empty if none.
[[nodiscard]] std::filesystem::path find_torchrun();

/// A TCP port nothing listens on now (the kernel's choice).
[[nodiscard]] int free_port();

/// This machine's host name.
[[nodiscard]] std::string host_name();

/// One torchrun agent: the command it runs under and its captured streams.
struct AgentSpec {
  std::string prefix;            ///< run under this ("ip netns exec NS"), or ""
  std::string endpoint;          ///< the c10d rendezvous endpoint, "ADDR:PORT"
  std::string rdzv_id;           ///< the job's id
  std::string ifname = "lo";     ///< GLOO_SOCKET_IFNAME
  std::string rdzv_conf;         ///< --rdzv-conf, e.g. "is_host=1", or ""
  std::string local_addr;        ///< --local-addr (the address other nodes reach this one at), or ""
  int nnodes = 2;
  int nproc_per_node = 2;
  int max_restarts = 0;
  std::filesystem::path db;      ///< every agent's --db (only rank 0 opens it)
  std::vector<std::string> set;  ///< --set options after the shrinking ones
  std::filesystem::path out, err;
};

/// Starts the agent; returns its pid.
[[nodiscard]] pid_t start_agent(const AgentSpec& spec);

/// Exit codes of `pids` (128 + signal for a killed one), each waited for
/// until `deadline`; one still running then is killed with everything under
/// it and counts as -1.
[[nodiscard]] std::vector<int> wait_all(const std::vector<pid_t>& pids,
                                        std::chrono::steady_clock::time_point deadline);

/// `pid` and every process under it (by parent), this instant.
[[nodiscard]] std::vector<pid_t> process_tree(pid_t pid);

/// Stops `pid` and everything under it, then SIGKILLs them all: a node lost
/// at once, with no process left to notice the others dying.
void kill_tree(pid_t pid);

/// The variables of a running process (/proc/PID/environ); empty if gone.
[[nodiscard]] std::map<std::string, std::string> environment_of(pid_t pid);

/// The worker processes of agent `agent` (its children that have RANK set),
/// by global rank.
[[nodiscard]] std::map<int, pid_t> workers_of(pid_t agent);

/// The loss of every recorded step of every finished run, as
/// "config hash:repeat:step=loss" lines in order.
[[nodiscard]] std::string recorded_losses(const std::filesystem::path& db);

/// The fingerprint of run `run_id` as "name=value" lines of its job.* fields.
[[nodiscard]] std::string job_fields(const std::filesystem::path& db, int run_id);

}  // namespace runner::test
