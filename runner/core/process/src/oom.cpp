#include "runner/process/oom.hpp"

#include <csignal>
#include <fstream>
#include <sstream>
#include <vector>

#include "runner/common/strings.hpp"
#include "runner/process/isolation.hpp"

namespace runner {
namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// mountinfo writes a space, tab, newline or backslash in a path as \ooo.
std::string unescape_octal(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      const std::string_view digits = text.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>(((digits[0] - '0') << 6) | ((digits[1] - '0') << 3) |
                                 (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

// Whether the comma-separated `list` holds `item`.
bool lists(std::string_view list, std::string_view item) {
  for (const std::string& entry : split(list, ','))
    if (entry == item) return true;
  return false;
}

struct Mount {
  std::string root;        // the folder of the hierarchy mounted here
  std::string mountpoint;
};

// The mount of cgroup v1's memory hierarchy, or of cgroup v2's.
std::optional<Mount> find_mount(std::string_view mountinfo, bool v1_memory) {
  for (const std::string& line : split(mountinfo, '\n')) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> fields = split(line.substr(0, dash), ' ');
    const std::vector<std::string> tail = split(line.substr(dash + 3), ' ');
    if (fields.size() < 5 || tail.size() < 3) continue;
    const bool match = v1_memory ? tail[0] == "cgroup" && lists(tail[2], "memory")
                                 : tail[0] == "cgroup2";
    if (match) return Mount{unescape_octal(fields[3]), unescape_octal(fields[4])};
  }
  return std::nullopt;
}

// `path` below the mount, or nullopt when the mount does not reach it.
std::optional<std::filesystem::path> below(const Mount& mount, const std::string& path) {
  if (mount.root == "/") return std::filesystem::path(mount.mountpoint) / path.substr(1);
  if (path == mount.root) return std::filesystem::path(mount.mountpoint);
  if (path.rfind(mount.root + "/", 0) == 0)
    return std::filesystem::path(mount.mountpoint) / path.substr(mount.root.size() + 1);
  return std::nullopt;
}

}  // namespace

std::filesystem::path oom_kill_counter_file(std::string_view cgroup, std::string_view mountinfo) {
  std::optional<std::string> v1, v2;
  for (const std::string& line : split(cgroup, '\n')) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (path.empty() || path.front() != '/') continue;
    if (line.substr(0, first) == "0" && controllers.empty()) v2 = path;
    if (lists(controllers, "memory")) v1 = path;
  }
  // A controller is bound to one hierarchy: on v1 when listed there.
  if (v1)
    if (const auto mount = find_mount(mountinfo, true))
      if (const auto folder = below(*mount, *v1)) return *folder / "memory.oom_control";
  if (!v1 && v2)
    if (const auto mount = find_mount(mountinfo, false))
      if (const auto folder = below(*mount, *v2)) return *folder / "memory.events";
  return {};
}

std::filesystem::path oom_kill_counter_file() {
  return oom_kill_counter_file(read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo"));
}

std::optional<std::int64_t> read_oom_kills(const std::filesystem::path& file) {
  if (file.empty()) return std::nullopt;
  std::ifstream in(file);
  std::string name;
  std::string value;
  while (in >> name >> value)
    if (name == "oom_kill") return parse_int64(value);
  return std::nullopt;
}

OomKillBaseline OomKillBaseline::take(std::filesystem::path file) {
  OomKillBaseline baseline;
  baseline.count = read_oom_kills(file);
  baseline.file = std::move(file);
  return baseline;
}

OomKillBaseline OomKillBaseline::take() { return take(oom_kill_counter_file()); }

std::string describe_kill(const std::string& who, int signal, const OomKillBaseline& before) {
  std::string text = (who.empty() ? "" : who + " was ") + describe_signal(signal);
  if (signal != SIGKILL) return text;
  // Runner's own SIGKILLs (a timeout, a second interrupt) are recorded as
  // such before this is asked; any other comes from the kernel or a person.
  const std::optional<std::int64_t> after = read_oom_kills(before.file);
  if (!before.count || !after)
    return text + " from outside runner, or by the kernel's OOM killer (this machine has no "
                  "cgroup count of OOM kills to tell which)";
  const std::string where = " in " + before.file.string();
  if (*after > *before.count)
    return text + ": out of memory (the kernel's OOM killer: oom_kill went from " +
           std::to_string(*before.count) + " to " + std::to_string(*after) + where + ")";
  return text + " from outside runner (not the kernel's OOM killer: oom_kill stayed at " +
         std::to_string(*after) + where + ")";
}

}  // namespace runner
