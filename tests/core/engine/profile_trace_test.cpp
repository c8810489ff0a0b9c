// The profiler trace under the output-path rule (issue 30 item 1): a FIFO or a
// symbolic link at the trace's path is left as it was and the run fails with
// the reason; a new path gets the trace. Before the rule the trace was renamed
// over whatever stood there.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "runner/common/error.hpp"
#include "runner/engine/profile.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

// One profiled step of a small matmul, then finish(); the trace goes to `trace`.
void profile_one_step(const fs::path& trace, RunOutcome& out) {
  StepProfiler profiler(1, false, false, trace);
  profiler.start();
  profiler.begin_step(0);
  (void)torch::ones({8, 8}).matmul(torch::ones({8, 8})).sum().item<float>();
  profiler.end_step();
  profiler.finish(1, out);
}

std::size_t entries(const fs::path& folder) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

TEST(ProfileTrace, AFifoAtTheTracePathIsLeftAsItWas) {
  const test::TempDir tmp("runner-profile-trace-");
  const fs::path trace = tmp.path() / "run-1.json";
  ASSERT_EQ(::mkfifo(trace.c_str(), 0644), 0);
  RunOutcome out;
  EXPECT_THROW_MSG(profile_one_step(trace, out), Error,
                   "cannot write " + trace.string() + ": it is a FIFO");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(trace)));
  EXPECT_EQ(entries(tmp.path()), 1u);  // no temporary left behind
  EXPECT_TRUE(out.files.empty());
}

TEST(ProfileTrace, ASymbolicLinkAtTheTracePathIsLeftAsItWasAndSoIsItsTarget) {
  const test::TempDir tmp("runner-profile-trace-");
  const fs::path target = tmp.write("target.json", "kept\n");
  const fs::path trace = tmp.path() / "run-1.json";
  fs::create_symlink(target, trace);
  RunOutcome out;
  EXPECT_THROW_MSG(profile_one_step(trace, out), Error,
                   "cannot write " + trace.string() + ": it is a symbolic link (to " +
                       target.string() + ")");
  EXPECT_EQ(fs::read_symlink(trace), target);
  EXPECT_EQ(test::slurp(target), "kept\n");
  EXPECT_EQ(entries(tmp.path()), 2u);
}

TEST(ProfileTrace, ANewPathGetsTheTrace) {
  const test::TempDir tmp("runner-profile-trace-");
  const fs::path trace = tmp.path() / "run-1.json";
  RunOutcome out;
  profile_one_step(trace, out);
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(trace)));
  EXPECT_NE(test::slurp(trace).find("traceEvents"), std::string::npos);
  ASSERT_EQ(out.files.size(), 1u);
  EXPECT_EQ(out.files[0].role, "profile_trace");
  EXPECT_EQ(entries(tmp.path()), 1u);
}

}  // namespace
}  // namespace runner
