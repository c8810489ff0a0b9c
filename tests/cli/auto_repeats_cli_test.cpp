// repeats = "auto" end to end (issue 32): a kernel experiment whose two
// shapes differ by three orders of magnitude stops at the first round that
// can decide its claim, and says so in the plan, at each look and at the end.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::query_int;
using runner::test::run_runner;
using runner::test::test_plugins;

const std::string kAuto =
    "[experiment]\nname = \"sizes\"\nkind = \"kernel\"\nrepeats = \"auto\"\nmin_repeats = 5\n"
    "max_repeats = 12\n[kernel]\nplugin = \"good_scale\"\ncalls = 10\nwarmup = 1\nbuffers = 2\n"
    "[sweep]\n\"kernel.shape\" = [[64, 8], [512, 512]]\n"
    "[[expect]]\nclaim = \"a 512x larger input takes longer a call\"\nmetric = \"call_time\"\n"
    "by = \"kernel.shape\"\nbaseline = [64, 8]\nversus = [512, 512]\nratio_above = 5\n";

class AutoRepeatsCliTest : public runner::test::CliTestBase {
 protected:
  AutoRepeatsCliTest() : CliTestBase("runner-auto-") {}
};

TEST_F(AutoRepeatsCliTest, AClearEffectStopsAtMinRepeats) {
  const fs::path file = write("sizes.toml", kAuto);
  const auto dry =
      run_runner("run " + file.string() + " --dry-run", dir_, {db_, test_plugins("kernels")});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("24 of 24 runs would run; nothing was written\nsizes: repeats = \"auto\": "
                         "rounds of one run of every trial, looked at after each from round 5, at "
                         "most 12 rounds; stops when its 1 expectation(s) are decided (the first "
                         "look that can decide: round 5) (the runs above are its most)"),
            std::string::npos)
      << dry.out;
  const auto r = run_runner("run " + file.string(), dir_, {db_, test_plugins("kernels")});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 10);
  EXPECT_NE(r.err.find("sizes: repeats = \"auto\": rounds of one run of every trial, looked at "
                       "after each from round 5, at most 12 rounds; stops when its 1 "
                       "expectation(s) are decided (the first look that can decide: round 5)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("repeats = \"auto\": after 5 round(s): 1 of 1 expectation(s) decided (1 "
                       "holds, 0 refuted)"),
            std::string::npos)
      << r.out;
  // runner check judges the same runs with the same sequential interval: holds.
  const auto check =
      run_runner("check " + file.string() + " --no-run", dir_, {db_, test_plugins("kernels")});
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  // Run again: the answer is already known, nothing runs.
  const auto again = run_runner("run " + file.string(), dir_, {db_, test_plugins("kernels")});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs"), 10);
  // A shard cannot look at every trial's runs.
  const auto shard =
      run_runner("run " + file.string() + " --shard 1/2", dir_, {db_, test_plugins("kernels")});
  EXPECT_EQ(shard.code, 2);
  EXPECT_EQ(shard.err.substr(0, shard.err.find('\n')),
            "error: --shard 1/2 cannot run repeats = \"auto\": the look after every round needs "
            "the runs of every trial, and a shard holds only some of them");
}

}  // namespace
