// Running one run in a child process so that a crash, a hang or an
// out-of-memory kill costs that run only.
//
// The child is forked from the runner after LibTorch and the plugins are
// loaded but before any operator ran or CUDA was touched, so it starts from a
// pristine state without paying LibTorch's start-up again (re-executing the
// binary costs ~1 s of static initialisation per run here; see docs/execution.md).
// No LibTorch in this header.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "runner/process/fd.hpp"

namespace runner {

/// How a child run ended, as seen by the parent.
struct ChildExit {
  enum class Kind { exited, signaled, timed_out, interrupted };
  Kind kind = Kind::exited;
  int exit_code = 0;   ///< for exited
  int signal = 0;      ///< for signaled
  double seconds = 0;  ///< wall time of the child
  int pid = 0;         ///< the child's process id, as messages name it
};

/// "killed by signal 11 (Segmentation fault)".
[[nodiscard]] std::string describe_signal(int signal);

/// Interrupt handling for the runner process: SIGINT and SIGTERM increment a
/// counter (and wake any waiter) instead of killing the process.
class Interrupts {
 public:
  /// Installs the handlers (idempotent).
  static void install();
  /// How many SIGINT/SIGTERM arrived since install.
  [[nodiscard]] static int count();
  /// A file descriptor that becomes readable on every interrupt (self-pipe).
  [[nodiscard]] static int wake_fd();
  /// For tests: forget earlier interrupts.
  static void reset();
  /// True once an interrupt arrived (for an in-process run's stop check).
  [[nodiscard]] static const std::atomic<bool>& flag();
};

/// Settings for one child run.
struct ChildOptions {
  std::chrono::duration<double> timeout{3600.0};  ///< kill the child after this long
  std::chrono::duration<double> tick{5.0};        ///< call on_tick this often while waiting
  std::function<void()> on_tick;                  ///< heartbeat
  /// Read end of a pipe the child writes lines to (-1: none); each complete
  /// line is passed to on_line (without its newline) while the parent waits.
  int line_fd = -1;
  std::function<void(const std::string&)> on_line;
};

/// Forks; the child runs `body` and _exits with its return value (never
/// returning into the caller's stack). The parent waits for it, honouring
/// the timeout and interrupts: the first interrupt is forwarded to the child
/// as SIGINT (it should stop cleanly); a second one kills it (SIGKILL).
/// The child is in its own process group (terminal signals reach only the
/// parent) and dies with the parent (PR_SET_PDEATHSIG).
[[nodiscard]] ChildExit run_in_child(const std::function<int()>& body, const ChildOptions& options);

/// Runs `body` in a forked child and returns the text it produced (for probes
/// that must not touch CUDA or start threads in the runner process itself).
/// Throws runner::Error (run kind) if the child fails.
[[nodiscard]] std::string capture_in_child(const std::function<std::string()>& body);

/// Processes forked to work beside this one: the other ranks of a
/// data-parallel run. Each child runs a body that returns only when it ends:
/// with its failure text (passed back through a pipe), or with "" when it
/// ends cleanly. The owner ends them all with stop(). A child dies with this
/// process (PR_SET_PDEATHSIG), so a run killed for a timeout takes its ranks
/// with it.
///
/// Teardown cannot race: stop() raises a flag in memory shared with every
/// child before it kills any of them, so a child whose work fails because a
/// sibling was just killed (a closed connection) can see that the failure is
/// the teardown's, not its own (stopping()), and end without a failure.
class Companions {
 public:
  Companions();
  Companions(const Companions&) = delete;
  Companions& operator=(const Companions&) = delete;
  ~Companions();

  /// Forks a child that runs `body` and _exits; `name` ("rank 1") labels its
  /// failures. Throws runner::Error (run kind) when fork fails.
  void spawn(const std::string& name, const std::function<std::string()>& body);

  /// Raises the teardown flag, kills the children that are still running
  /// (SIGKILL, all of them before reaping any) and reaps them all.
  /// Idempotent. Afterwards failures() lists, in spawn order, each child that
  /// ended on its own with a failure before it was killed: "rank 1: <its
  /// text>", or "rank 1 was killed by signal 11 (Segmentation fault)".
  void stop();

  /// True once stop() has begun; readable in the children (shared memory).
  [[nodiscard]] bool stopping() const;

  /// What stop() found.
  [[nodiscard]] const std::vector<std::string>& failures() const { return failures_; }

 private:
  struct Child {
    std::string name;
    ChildProcess process;
    UniqueFd error;  ///< read end of the pipe the child writes its failure to
  };
  std::vector<Child> children_;
  std::vector<std::string> failures_;
  std::atomic<bool>* stopping_ = nullptr;  ///< in a MAP_SHARED page, inherited by every child
};

/// Ignores a signal in this process, and in the children it forks meanwhile,
/// for as long as it lives; then puts back what was there before.
///
/// A data-parallel run holds one for SIGPIPE: Gloo writes to its peers with
/// writev(2), which raises SIGPIPE when the peer has died, and it expects the
/// host to ignore the signal (Python does) so that the write fails with EPIPE.
/// Without it a rank that crashes can kill the survivor that writes to it
/// next, and the run would be reported as a broken pipe instead of the crash.
class IgnoredSignal {
 public:
  explicit IgnoredSignal(int signal);
  IgnoredSignal(const IgnoredSignal&) = delete;
  IgnoredSignal& operator=(const IgnoredSignal&) = delete;
  ~IgnoredSignal();

 private:
  int signal_;
  struct sigaction previous_ {};
};

/// In a process that run_in_child started and that then replaced its image
/// (execve): installs the SIGINT handler behind child_stop_requested() and
/// unblocks SIGINT, which the fork blocked across the exec so that an early
/// interrupt waits for the handler instead of killing the process.
void install_child_stop_handler();

/// Blocks SIGINT in this thread (before an execve that
/// install_child_stop_handler() completes).
void block_interrupts();

/// In a child: true once the parent asked it to stop (SIGINT received).
[[nodiscard]] bool child_stop_requested();
/// The flag child_stop_requested() reads, for the engine's loop.
[[nodiscard]] const std::atomic<bool>& child_stop_flag();

}  // namespace runner
