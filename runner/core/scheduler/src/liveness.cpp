// Whether the runner process behind a "running" row still exists: killed with
// SIGKILL, a container that lost power, ... leave rows that nothing will ever
// finish. A pid alone is not enough (pids are reused, and a reboot ends every
// process), so a run records its runner's host, boot and start time too.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "liveness.hpp"
#include "runner/common/strings.hpp"

namespace runner {
namespace {

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Field 3 (state) and field 22 (start time in clock ticks after boot) of
// /proc/PID/stat; the command name in field 2 may hold spaces and parentheses,
// so fields are counted after its last ')'.
struct ProcStat {
  char state = '?';
  std::int64_t start = 0;
};

std::optional<ProcStat> proc_stat(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto paren = line.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  const std::vector<std::string> fields = split(trim(line.substr(paren + 1)), ' ');
  // fields[0] is field 3 (state); field 22 is fields[19].
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  ProcStat stat;
  stat.state = fields[0][0];
  stat.start = parse_int64(fields[19]).value_or(0);
  return stat;
}

}  // namespace

ProcessIdentity this_process() {
  ProcessIdentity me;
  me.pid = ::getpid();
  me.host = hostname();
  me.boot_id = boot_id();
  if (const auto stat = proc_stat(me.pid)) me.start = stat->start;
  return me;
}

Liveness liveness_of(const store::RunningRun& run) {
  if (run.pid <= 0) return Liveness::unknown;
  // Databases are per machine until merged: a run with no recorded host
  // (killed before anything identified it) is this machine's.
  if (!run.hostname.empty() && run.hostname != hostname()) return Liveness::unknown;
  if (!run.boot_id.empty() && run.boot_id != boot_id()) return Liveness::gone;  // rebooted since
  if (::kill(static_cast<pid_t>(run.pid), 0) != 0 && errno == ESRCH) return Liveness::gone;
  const auto stat = proc_stat(run.pid);
  if (!stat) return Liveness::gone;
  // A killed process nobody has reaped yet still answers kill(): a zombie.
  if (stat->state == 'Z' || stat->state == 'X') return Liveness::gone;
  // The pid now belongs to another process.
  if (run.pid_start > 0 && stat->start != run.pid_start) return Liveness::gone;
  return Liveness::alive;
}

std::int64_t mark_orphans_interrupted(store::Store& db) {
  std::int64_t marked = 0;
  for (const auto& run : db.running_runs()) {
    if (liveness_of(run) != Liveness::gone) continue;
    if (db.mark_interrupted(run.run_id, "its runner process (pid " + std::to_string(run.pid) +
                                            ") is gone"))
      ++marked;
  }
  return marked;
}

}  // namespace runner
