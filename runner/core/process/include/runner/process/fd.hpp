// Owning file descriptors and the pipe and child-process handles built on
// them: every descriptor and every forked child the runner makes has an owner
// whose destructor releases it, so an exception on any path leaks neither.
// No LibTorch here.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace runner {

/// Owns one file descriptor and closes it on destruction (move-only).
class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd` (-1: empty).
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  /// The descriptor, still owned (-1 when empty).
  [[nodiscard]] int get() const noexcept { return fd_; }
  /// True when a descriptor is owned.
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Closes the owned descriptor (if any) and takes `fd`.
  void reset(int fd = -1) noexcept;
  /// Gives up ownership without closing.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

/// Both ends of a pipe, close-on-exec.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

/// A new pipe. Throws runner::Error (run kind) when the system refuses one.
[[nodiscard]] Pipe make_pipe();

/// Writes all of `text`, retrying after EINTR; false on an error.
bool write_all(int fd, const std::string& text);

/// Reads until end of file (retrying after EINTR); stops at an error.
[[nodiscard]] std::string read_all(int fd);

/// A forked child owned by the parent: unless it has been waited for, the
/// destructor kills it (SIGKILL) and reaps it, so a throw between fork and
/// wait leaves no running process and no zombie behind.
class ChildProcess {
 public:
  ChildProcess() = default;
  /// Takes ownership of the child `pid` (> 0).
  explicit ChildProcess(pid_t pid) noexcept : pid_(pid) {}
  ChildProcess(ChildProcess&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { kill_and_reap(); }

  /// The child's pid, or -1 once reaped.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// Sends `signal` to the child if it has not been reaped (harmless on a zombie).
  void signal(int signal) const noexcept;
  /// Waits for the child to end and returns its wait status; afterwards the
  /// object owns nothing.
  int wait() noexcept;
  /// SIGKILL and wait, if still owned. Returns the wait status (0 if nothing was owned).
  int kill_and_reap() noexcept;

 private:
  pid_t pid_ = -1;
};

/// fork(); in the child, arranges for it to die with this process
/// (PR_SET_PDEATHSIG). Returns the child's handle in the parent and an empty
/// handle (pid() == -1) in the child. Throws runner::Error (run kind) naming
/// `what` when fork fails.
[[nodiscard]] ChildProcess fork_linked(const std::string& what);

/// A pidfd for `child` (pollable: readable once the child ends). Throws
/// runner::Error (run kind) when the kernel refuses one.
[[nodiscard]] UniqueFd open_pidfd(const ChildProcess& child);

/// Open file descriptors of this process (entries of /proc/self/fd), for tests
/// and diagnostics.
[[nodiscard]] int count_open_fds();

}  // namespace runner
