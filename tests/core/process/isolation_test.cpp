// Child-process runs: exit codes, signals, timeouts, heartbeats, interrupts.
#include "runner/process/isolation.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>

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

TEST(RunInChild, AHangIsKilledAtTheTimeoutWhileTheParentHeartbeats) {
  int ticks = 0;
  runner::ChildOptions o = quick(0.5, 0.05);
  o.on_tick = [&] { ++ticks; };
  const auto r = runner::run_in_child([] { for (;;) ::pause(); return 0; }, o);
  EXPECT_EQ(r.kind, Kind::timed_out);
  EXPECT_GE(r.seconds, 0.5);
  EXPECT_GE(ticks, 5);
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

}  // namespace
