// Child-process runs whose assertions depend on the scheduling of this
// machine (label `timing`: run serially).
#include <gtest/gtest.h>
#include <unistd.h>

#include "runner/process/isolation.hpp"

namespace {

using Kind = runner::ChildExit::Kind;

runner::ChildOptions quick(double timeout_s, double tick_s) {
  runner::ChildOptions o;
  o.timeout = std::chrono::duration<double>(timeout_s);
  o.tick = std::chrono::duration<double>(tick_s);
  return o;
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

}  // namespace
