// Child-process runs: exit codes, signals, timeouts, heartbeats, interrupts.
#include "runner/process/isolation.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <stdexcept>

#include "runner/common/error.hpp"
#include "runner/process/fd.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using Kind = runner::ChildExit::Kind;

runner::ChildOptions quick(double timeout_s, double tick_s = 1.0) {
  runner::ChildOptions o;
  o.timeout = std::chrono::duration<double>(timeout_s);
  o.tick = std::chrono::duration<double>(tick_s);
  return o;
}

// Blocks until SIGINT arrives, without a window in which it could be missed.
int wait_for_sigint_then(int code) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
  return code;
}

TEST(RunInChild, ReportsTheExitCode) {
  const auto r = runner::run_in_child([] { return 7; }, quick(30));
  EXPECT_EQ(r.kind, Kind::exited);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_GE(r.seconds, 0);
}

TEST(RunInChild, AnExceptionInTheChildIsExitCodeOne) {
  const auto r = runner::run_in_child([]() -> int { throw std::runtime_error("x"); }, quick(30));
  EXPECT_EQ(r.kind, Kind::exited);
  EXPECT_EQ(r.exit_code, 1);
}

TEST(RunInChild, ACrashIsReportedWithItsSignal) {
  const auto r = runner::run_in_child([] { std::raise(SIGSEGV); return 0; }, quick(30));
  EXPECT_EQ(r.kind, Kind::signaled);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(runner::describe_signal(SIGSEGV), "killed by signal 11 (Segmentation fault)");
}

TEST(RunInChild, TheFirstInterruptIsForwardedAsSigint) {
  runner::Interrupts::install();
  runner::Interrupts::reset();
  runner::ChildOptions o = quick(30, 0.05);
  bool sent = false;
  o.on_tick = [&] {
    if (!sent) std::raise(SIGINT);  // as if the user pressed Ctrl-C once
    sent = true;
  };
  const auto r = runner::run_in_child([] { return wait_for_sigint_then(42); }, o);
  EXPECT_EQ(r.kind, Kind::exited);
  EXPECT_EQ(r.exit_code, 42);
  EXPECT_EQ(runner::Interrupts::count(), 1);
  runner::Interrupts::reset();
}

TEST(RunInChild, ASecondInterruptKillsTheChild) {
  runner::Interrupts::install();
  runner::Interrupts::reset();
  runner::ChildOptions o = quick(30, 0.05);
  o.on_tick = [&] { std::raise(SIGINT); };
  // The child ignores the polite request, so only the second interrupt ends it.
  const auto r = runner::run_in_child(
      [] {
        ::signal(SIGINT, SIG_IGN);
        for (;;) ::pause();
        return 0;
      },
      o);
  EXPECT_EQ(r.kind, Kind::interrupted);
  EXPECT_GE(runner::Interrupts::count(), 2);
  runner::Interrupts::reset();
}

TEST(RunInChild, AKilledHangIsATimeoutNotACrash) {
  const auto r = runner::run_in_child([] { for (;;) ::pause(); return 0; }, quick(0.2, 0.05));
  EXPECT_EQ(r.kind, Kind::timed_out);
  EXPECT_GE(r.seconds, 0.2);
}

// True when this process has no child at all, running or unreaped.
bool no_child_left() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

TEST(RunInChild, AThrowingHeartbeatLeavesNoDescriptorAndNoChild) {
  const int before = runner::count_open_fds();
  ASSERT_GT(before, 0);
  runner::ChildOptions o = quick(30, 0.0);
  // The heartbeat opens the database in real use; here it fails at once,
  // while the child still runs.
  o.on_tick = [] { throw std::runtime_error("database is locked"); };
  EXPECT_THROW_MSG((void)runner::run_in_child([] { for (;;) ::pause(); return 0; }, o),
                   std::runtime_error, "database is locked");
  EXPECT_EQ(runner::count_open_fds(), before);
  EXPECT_TRUE(no_child_left());
}

// Lowers this process's descriptor limit so that exactly `free` more
// descriptors can be opened, and restores it on destruction.
class FdLimit {
 public:
  explicit FdLimit(int free) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    // The lowest free numbers are the ones the next opens get.
    std::vector<int> probes;
    for (int i = 0; i < free; ++i) probes.push_back(::dup(0));
    int highest = 0;
    for (int fd : probes) highest = std::max(highest, fd);
    for (int fd : probes) ::close(fd);
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(highest + 1);
    ::setrlimit(RLIMIT_NOFILE, &lowered);
  }
  FdLimit(const FdLimit&) = delete;
  FdLimit& operator=(const FdLimit&) = delete;
  ~FdLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

TEST(CaptureInChild, ReturnsWhatTheChildWrote) {
  EXPECT_EQ(runner::capture_in_child([] { return std::string("cpu\n"); }), "cpu\n");
}

TEST(CaptureInChild, ARefusedPidfdLeavesNoDescriptorAndNoChild) {
  // UBSan's vptr check opens a pipe the first time it meets a polymorphic
  // type (to test that the object's memory is readable); under the limit
  // below it cannot, and would call the Error that reports the refusal an
  // invalid object. Let it meet runner::Error first.
  EXPECT_THROW(throw runner::Error("warm-up"), runner::Error);
  const int before = runner::count_open_fds();
  {
    // Room for the capture pipe's two ends, none for the pidfd.
    const FdLimit limit(2);
    EXPECT_THROW_MSG((void)runner::capture_in_child([] { return std::string("x"); }),
                     runner::Error,
                     "cannot watch the run process (pidfd_open): Too many open files");
  }
  EXPECT_EQ(runner::count_open_fds(), before);
  EXPECT_TRUE(no_child_left());
}

TEST(Companions, StopReapsEveryRankAndClosesItsPipe) {
  const int before = runner::count_open_fds();
  {
    // `done` reaches end of file once rank 1 has exited: rank 1 holds its
    // write end until then, rank 2 lets go of it at once.
    runner::Pipe done = runner::make_pipe();
    runner::Companions ranks;
    ranks.spawn("rank 1", [] { return std::string("loss is nan"); });
    ranks.spawn("rank 2", [&]() -> std::string {
      done.write.reset();
      for (;;) ::pause();
    });
    done.write.reset();
    (void)runner::read_all(done.read.get());
    ranks.stop();
    // Rank 1 ended on its own with its reason; rank 2 was killed, which is no failure.
    ASSERT_EQ(ranks.failures().size(), 1u);
    EXPECT_EQ(ranks.failures()[0], "rank 1: loss is nan");
  }
  EXPECT_EQ(runner::count_open_fds(), before);
  EXPECT_TRUE(no_child_left());
}

TEST(Companions, AChildThatEndsCleanlyIsNoFailure) {
  runner::Pipe done = runner::make_pipe();
  runner::Companions ranks;
  EXPECT_FALSE(ranks.stopping());
  // Rank 1 reads the teardown flag it shares with this process (not raised
  // yet) and ends cleanly; `done` reaches end of file once it has exited.
  ranks.spawn("rank 1", [&] { return ranks.stopping() ? std::string("raised") : std::string(); });
  done.write.reset();
  (void)runner::read_all(done.read.get());  // rank 1 has exited
  ranks.stop();
  EXPECT_TRUE(ranks.stopping());
  EXPECT_TRUE(ranks.failures().empty()) << ranks.failures().front();
}

TEST(Companions, DestructionWithoutStopKillsAndReaps) {
  const int before = runner::count_open_fds();
  {
    runner::Companions ranks;
    ranks.spawn("rank 1", []() -> std::string { for (;;) ::pause(); });
  }
  EXPECT_EQ(runner::count_open_fds(), before);
  EXPECT_TRUE(no_child_left());
}

}  // namespace
