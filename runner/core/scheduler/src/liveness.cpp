// Runs whose runner process is gone: killed with SIGKILL, a container that
// lost power, ... Their rows still say "running"; nothing will ever finish them.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "runner/scheduler/scheduler.hpp"

namespace runner {
namespace {

bool process_gone(std::int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  // A killed process nobody has reaped yet still answers kill(); it is a zombie.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

}  // namespace

std::int64_t mark_orphans_interrupted(store::Store& db) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::int64_t marked = 0;
  for (const auto& run : db.running_runs()) {
    // A run killed before its process recorded a fingerprint has no host:
    // databases are per machine (shards are merged afterwards), so it is ours.
    if (run.pid <= 0 || (!run.hostname.empty() && run.hostname != host)) continue;
    if (!process_gone(run.pid)) continue;
    if (db.mark_interrupted(run.run_id, "its runner process (pid " + std::to_string(run.pid) +
                                            ") is gone"))
      ++marked;
  }
  return marked;
}

}  // namespace runner
