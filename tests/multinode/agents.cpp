#include "agents.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace runner::test {

namespace fs = std::filesystem;

fs::path find_torchrun() {
  const fs::path python = oracle_python();
  if (!python.empty() && fs::exists(python.parent_path() / "torchrun"))
    return python.parent_path() / "torchrun";
  const char* home = std::getenv("HOME");
  const fs::path cache = fs::path(home != nullptr ? home : "/root") / ".cache" / "runner";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cache, ec))
    if (entry.path().filename().string().rfind("venv-torch-", 0) == 0 &&
        fs::exists(entry.path() / "bin" / "torchrun"))
      return entry.path() / "bin" / "torchrun";
  return {};
}

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

pid_t start_agent(const AgentSpec& spec) {
  std::string command = (spec.prefix.empty() ? "" : spec.prefix + " ") +
                        "env GLOO_SOCKET_IFNAME=" + spec.ifname + " " + find_torchrun().string() +
                        " --nnodes " + std::to_string(spec.nnodes) + " --nproc-per-node " +
                        std::to_string(spec.nproc_per_node) + " --max-restarts " +
                        std::to_string(spec.max_restarts) + " --monitor-interval 0.2";
  command += spec.nnodes == 1 ? std::string(" --standalone")
                              : " --rdzv-backend c10d --rdzv-endpoint " + spec.endpoint +
                                    " --rdzv-id " + spec.rdzv_id +
                                    (spec.rdzv_conf.empty() ? "" : " --rdzv-conf " + spec.rdzv_conf) +
                                    (spec.local_addr.empty() ? "" : " --local-addr " + spec.local_addr);
  std::string args = "run " + (fs::path(RUNNER_SOURCE_DIR) / "experiments" / "data_parallel.toml")
                                  .string();
  for (const auto& s : spec.set) args += " --set " + s;
  command += " --no-python " + runner_command(args, {spec.db, {}}) + " > " + spec.out.string() +
             " 2> " + spec.err.string();
  return spawn(command);
}

std::vector<int> wait_all(const std::vector<pid_t>& pids,
                          std::chrono::steady_clock::time_point deadline) {
  std::vector<int> codes(pids.size(), -2);
  wait_until(deadline, [&] {
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
      kill_tree(pids[i]);
      ::waitpid(pids[i], nullptr, 0);
      codes[i] = -1;
    }
  return codes;
}

namespace {

// Parent pid of every process, from /proc/PID/stat.
std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::string(entry->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');  // the command may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t parent = 0;
    rest >> state >> parent;
    out[pid] = parent;
  }
  ::closedir(proc);
  return out;
}

}  // namespace

std::vector<pid_t> process_tree(pid_t pid) {
  const auto parent = parents();
  std::vector<pid_t> tree{pid};
  for (std::size_t i = 0; i < tree.size(); ++i)
    for (const auto& [child, up] : parent)
      if (up == tree[i]) tree.push_back(child);
  return tree;
}

void kill_tree(pid_t pid) {
  // Stopped first, so that nothing forks or restarts while the tree is read again.
  for (pid_t p : process_tree(pid)) ::kill(p, SIGSTOP);
  for (pid_t p : process_tree(pid)) ::kill(p, SIGKILL);
}

std::map<std::string, std::string> environment_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::map<std::string, std::string> out;
  for (std::string entry; std::getline(in, entry, '\0');) {
    const auto equals = entry.find('=');
    if (equals != std::string::npos) out[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  return out;
}

std::map<int, pid_t> workers_of(pid_t agent) {
  std::map<int, pid_t> out;
  for (const auto& [pid, parent] : parents()) {
    if (parent != agent) continue;
    const auto env = environment_of(pid);
    if (const auto it = env.find("RANK"); it != env.end()) out[std::atoi(it->second.c_str())] = pid;
  }
  return out;
}

std::string recorded_losses(const fs::path& db) {
  return query_text(db,
                    "SELECT group_concat(line, char(10)) FROM (SELECT t.config_hash || ':' || "
                    "r.repeat_index || ':' || s.step || '=' || printf('%.17g', s.loss) AS line "
                    "FROM samples s JOIN runs r ON r.id = s.run_id JOIN trials t ON t.id = "
                    "r.trial_id WHERE r.status = 'finished' ORDER BY t.config_hash, "
                    "r.repeat_index, s.step)");
}

std::string job_fields(const fs::path& db, int run_id) {
  return query_text(db,
                    "SELECT group_concat(key || '=' || value, char(10)) FROM (SELECT j.key, "
                    "j.value FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id, "
                    "json_each(f.json) j WHERE r.id = " +
                        std::to_string(run_id) + " AND j.key LIKE 'job.%' ORDER BY j.key)");
}

}  // namespace runner::test
