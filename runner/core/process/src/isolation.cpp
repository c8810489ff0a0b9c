#include "runner/process/isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <pthread.h>
#include <string>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/process/fd.hpp"

namespace runner {
namespace {

std::atomic<int> g_interrupts{0};
std::atomic<bool> g_interrupt_flag{false};
int g_wake_pipe[2] = {-1, -1};
std::atomic<bool> g_child_stop{false};

void on_interrupt(int) {
  g_interrupts.fetch_add(1);
  g_interrupt_flag.store(true);
  if (g_wake_pipe[1] >= 0) {
    const char byte = 1;
    // Nothing useful to do if the pipe is full: the waiter wakes anyway.
    [[maybe_unused]] ssize_t n = ::write(g_wake_pipe[1], &byte, 1);
  }
}

void on_child_interrupt(int) { g_child_stop.store(true); }

using Clock = std::chrono::steady_clock;

}  // namespace

std::string describe_signal(int signal) {
  const char* name = ::strsignal(signal);
  return "killed by signal " + std::to_string(signal) + " (" + (name ? name : "unknown") + ")";
}

IgnoredSignal::IgnoredSignal(int signal) : signal_(signal) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(signal_, &ignore, &previous_);
}

IgnoredSignal::~IgnoredSignal() { ::sigaction(signal_, &previous_, nullptr); }

void Interrupts::install() {
  if (g_wake_pipe[0] < 0) {
    if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw Error(std::string("cannot create a pipe: ") + std::strerror(errno), {}, ErrorKind::run);
  }
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

int Interrupts::count() { return g_interrupts.load(); }
int Interrupts::wake_fd() { return g_wake_pipe[0]; }
const std::atomic<bool>& Interrupts::flag() { return g_interrupt_flag; }
void Interrupts::reset() {
  g_interrupts.store(0);
  g_interrupt_flag.store(false);
  char buffer[64];
  while (g_wake_pipe[0] >= 0 && ::read(g_wake_pipe[0], buffer, sizeof buffer) > 0) {
  }
}

std::string capture_in_child(const std::function<std::string()>& body) {
  Pipe pipe = make_pipe();
  ChildOptions options;
  options.timeout = std::chrono::duration<double>(600.0);
  const ChildExit exit = run_in_child(
      [&]() -> int {
        pipe.read.reset();
        return write_all(pipe.write.get(), body()) ? 0 : 1;
      },
      options);
  pipe.write.reset();  // the child has ended: the read below sees end of file
  const std::string out = read_all(pipe.read.get());
  if (exit.kind != ChildExit::Kind::exited || exit.exit_code != 0)
    throw Error("a probe process failed" +
                    (exit.kind == ChildExit::Kind::signaled ? ": " + describe_signal(exit.signal)
                                                            : std::string()),
                {}, ErrorKind::run);
  return out;
}

void install_child_stop_handler() {
  struct sigaction action {};
  action.sa_handler = on_child_interrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void block_interrupts() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool child_stop_requested() { return g_child_stop.load(std::memory_order_relaxed); }
const std::atomic<bool>& child_stop_flag() { return g_child_stop; }

ChildExit run_in_child(const std::function<int()>& body, const ChildOptions& options) {
  const auto start = Clock::now();
  ChildProcess child = fork_linked("a run process");
  if (child.pid() < 0) {
    // Child: its own process group, so a terminal's Ctrl-C reaches only the
    // parent, which forwards exactly one SIGINT.
    ::setpgid(0, 0);
    struct sigaction action {};
    action.sa_handler = on_child_interrupt;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 1;
    }
    ::_exit(code);  // no destructors of the parent's objects run in the child
  }

  // From here on, any throw (no pidfd, a throwing heartbeat) kills and reaps
  // the child and closes the pidfd through their owners.
  const UniqueFd pidfd = open_pidfd(child);
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(options.timeout);
  auto next_tick = start + std::chrono::duration_cast<Clock::duration>(options.tick);
  int forwarded = 0;
  bool killed_for_timeout = false, killed_for_interrupt = false;
  int line_fd = options.on_line ? options.line_fd : -1;
  std::string pending;  // a line not yet complete
  const auto drain_lines = [&] {
    char buffer[4096];
    while (line_fd >= 0) {
      const ssize_t n = ::read(line_fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 || errno != EAGAIN) line_fd = -1;  // closed: stop polling it
        return;
      }
      pending.append(buffer, static_cast<std::size_t>(n));
      for (auto newline = pending.find('\n'); newline != std::string::npos;
           newline = pending.find('\n')) {
        const std::string line = pending.substr(0, newline);
        pending.erase(0, newline + 1);
        options.on_line(line);
      }
      if (pending.size() > 65536) pending.clear();  // a runaway line is dropped, not buffered
    }
  };
  if (line_fd >= 0) ::fcntl(line_fd, F_SETFL, ::fcntl(line_fd, F_GETFL) | O_NONBLOCK);
  while (true) {
    const auto now = Clock::now();
    if (!killed_for_timeout && now >= deadline) {
      child.signal(SIGKILL);
      killed_for_timeout = true;
    }
    if (now >= next_tick) {
      if (options.on_tick) options.on_tick();
      next_tick = now + std::chrono::duration_cast<Clock::duration>(options.tick);
    }
    const auto wake = std::min(deadline, next_tick);
    const auto wait_ms = std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1);
    // A negative descriptor is ignored by poll(2).
    pollfd fds[3] = {{pidfd.get(), POLLIN, 0}, {Interrupts::wake_fd(), POLLIN, 0},
                     {line_fd, POLLIN, 0}};
    const int ready = ::poll(fds, 3, static_cast<int>(wait_ms));
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) drain_lines();
    if (fds[1].fd >= 0 && (fds[1].revents & POLLIN)) {
      char buffer[64];
      while (::read(fds[1].fd, buffer, sizeof buffer) > 0) {
      }
    }
    const int interrupts = Interrupts::count();
    if (interrupts > forwarded) {
      if (forwarded == 0) child.signal(SIGINT);  // ask the run to stop cleanly
      if (interrupts >= 2 && !killed_for_interrupt) {
        child.signal(SIGKILL);  // a second interrupt: stop now
        killed_for_interrupt = true;
      }
      forwarded = interrupts;
    }
    if (ready > 0 && (fds[0].revents & POLLIN)) break;
  }
  drain_lines();  // what the child wrote just before it ended
  ChildExit result;
  result.pid = child.pid();
  const int status = child.wait();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (killed_for_timeout) {
    result.kind = ChildExit::Kind::timed_out;
  } else if (killed_for_interrupt) {
    result.kind = ChildExit::Kind::interrupted;
  } else if (WIFSIGNALED(status)) {
    result.kind = ChildExit::Kind::signaled;
    result.signal = WTERMSIG(status);
  } else {
    result.kind = ChildExit::Kind::exited;
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

Companions::Companions() {
  void* page = ::mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED)
    throw Error(std::string("cannot map memory shared with the ranks: ") + std::strerror(errno),
                {}, ErrorKind::run);
  stopping_ = new (page) std::atomic<bool>(false);
}

Companions::~Companions() {
  stop();
  ::munmap(stopping_, sizeof(std::atomic<bool>));
}

bool Companions::stopping() const { return stopping_->load(); }

void Companions::spawn(const std::string& name, const std::function<std::string()>& body) {
  Pipe pipe = make_pipe();
  ChildProcess process = fork_linked(name);
  if (process.pid() < 0) {
    pipe.read.reset();
    std::string text;
    try {
      text = body();
    } catch (const std::exception& e) {
      text = e.what();
    } catch (...) {
      text = "unknown exception";
    }
    if (text.empty()) ::_exit(0);
    (void)write_all(pipe.write.get(), text);
    ::_exit(1);
  }
  pipe.write.reset();
  children_.push_back({name, std::move(process), std::move(pipe.read)});
}

void Companions::stop() {
  stopping_->store(true);
  // Every child learns about the teardown before the first one dies.
  for (const Child& child : children_) child.process.signal(SIGKILL);
  for (Child& child : children_) {
    if (child.process.pid() < 0) continue;
    const int status = child.process.wait();
    // A child writes its text before it exits, so once reaped all of it is in the pipe.
    const std::string text = read_all(child.error.get());
    child.error.reset();
    if (!text.empty()) {
      failures_.push_back(child.name + ": " + text);
    } else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) {
      failures_.push_back(child.name + " was " + describe_signal(WTERMSIG(status)));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      failures_.push_back(child.name + " exited with code " +
                          std::to_string(WEXITSTATUS(status)));
    }
  }
}

}  // namespace runner
