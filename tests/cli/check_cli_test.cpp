// runner check end to end (issue 32): a kernel experiment whose two shapes
// differ by three orders of magnitude, so every verdict is certain; each exit
// code, --no-run, --format json, and bad expectations refused before anything runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::query_int;
using runner::test::run_runner;
using runner::test::test_plugins;

// Two trials (shapes [64, 8] and [512, 512]) x `repeats`, then `expect`.
std::string kernel_file(int repeats, const std::string& expect) {
  return "[experiment]\nname = \"sizes\"\nkind = \"kernel\"\nrepeats = " + std::to_string(repeats) +
         "\n[kernel]\nplugin = \"good_scale\"\ncalls = 10\nwarmup = 1\nbuffers = 2\n"
         "[sweep]\n\"kernel.shape\" = [[64, 8], [512, 512]]\n" +
         expect;
}

const std::string kHolds =
    "[[expect]]\nclaim = \"a 512x larger input takes longer a call\"\nsource = \"arithmetic\"\n"
    "metric = \"call_time\"\nby = \"kernel.shape\"\nbaseline = [64, 8]\nversus = [512, 512]\n"
    "ratio_above = 5\n";
const std::string kRefuted =
    "[[expect]]\nclaim = \"the larger input is faster\"\nmetric = \"call_time\"\n"
    "by = \"kernel.shape\"\nbaseline = [64, 8]\nversus = [512, 512]\nratio_below = 1\n";

class CheckCliTest : public runner::test::CliTestBase {
 protected:
  CheckCliTest() : CliTestBase("runner-check-") {}
  runner::test::Result check(const fs::path& file, const std::string& flags = "") const {
    return run_runner("check " + file.string() + flags, dir_, {db_, test_plugins("kernels")});
  }
};

TEST_F(CheckCliTest, RunsWhatTheClaimNeedsThenEachVerdictSetsTheExitCode) {
  const fs::path holds = write("holds.toml", kernel_file(4, kHolds));
  const auto ran = check(holds);
  ASSERT_EQ(ran.code, 0) << ran.out << ran.err;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 8);
  EXPECT_NE(ran.out.find("holds"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("4/4"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("a 512x larger input takes longer a call"), std::string::npos);
  EXPECT_NE(ran.out.find("source: arithmetic"), std::string::npos) << ran.out;
  // The runs' own table goes to standard error, the verdicts alone to standard output.
  EXPECT_EQ(ran.out.find("recorded in"), std::string::npos) << ran.out;

  // Resumed: nothing left to run, the same verdict.
  const auto again = check(holds);
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs"), 8);

  // A claim the same runs refute: exit 1, judged from the recorded runs of the same trials.
  const fs::path refuted = write("refuted.toml", kernel_file(4, kHolds + kRefuted));
  const auto no = check(refuted, " --no-run");
  EXPECT_EQ(no.code, 1) << no.out << no.err;
  EXPECT_NE(no.out.find("refuted"), std::string::npos) << no.out;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs"), 8);

  // --format json: one object per expectation.
  const auto json = check(refuted, " --no-run --format json");
  EXPECT_EQ(json.code, 1);
  const nlohmann::json parsed = nlohmann::json::parse(json.out);
  ASSERT_EQ(parsed["expectations"].size(), 2u);
  const nlohmann::json& first = parsed["expectations"][0];
  EXPECT_EQ(first["claim"], "a 512x larger input takes longer a call");
  EXPECT_EQ(first["verdict"], "holds");
  EXPECT_EQ(first["runs"], nlohmann::json::array({4, 4}));
  ASSERT_EQ(first["ci"].size(), 2u);
  EXPECT_GT(first["ci"][0].get<double>(), 5.0);
  EXPECT_LE(first["ci"][0].get<double>(), first["ratio"].get<double>());
  EXPECT_GE(first["ci"][1].get<double>(), first["ratio"].get<double>());
  EXPECT_EQ(first["bound"]["kind"], "ratio_above");
  EXPECT_EQ(parsed["expectations"][1]["verdict"], "refuted");
  EXPECT_EQ(parsed["exit"], 1);
}

TEST_F(CheckCliTest, UndecidedExitsThreeAndSaysHowManyRunsWouldDecide) {
  // Nothing recorded and nothing run: no values, undecided.
  const fs::path file = write("sizes.toml", kernel_file(4, kHolds));
  const auto none = check(file, " --no-run");
  EXPECT_EQ(none.code, 3) << none.out << none.err;
  EXPECT_NE(none.out.find("undecided (side A has no finished run): about 4 more run(s) a side would "
                          "likely decide it (runner check " + file.string() +
                              " --set experiment.repeats=4)"),
            std::string::npos)
      << none.out;
  EXPECT_FALSE(fs::exists(db_));
  // Two runs a side are too few for any verdict.
  const auto two = check(file, " --set experiment.repeats=2");
  EXPECT_EQ(two.code, 3) << two.out << two.err;
  EXPECT_NE(two.out.find("undecided (2 runs a side: a verdict needs 4)"), std::string::npos) << two.out;
}

TEST_F(CheckCliTest, AFailedRunExitsOne) {
  const fs::path file = write(
      "failing.toml",
      runner::test::tiny_experiment(
          {.steps = 3,
           .rest = "[experiment]\nname = \"failing\"\n[sweep]\n\"model.throw_at_step\" = [-1, 1]\n"
                   "[[expect]]\nclaim = \"c\"\nmetric = \"step_time\"\nby = \"model.throw_at_step\"\n"
                   "baseline = -1\nversus = 1\nratio_below = 2\n"}));
  const auto r = run_runner("check " + file.string(), dir_, {db_, test_plugins("good")});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("a run these expectations need failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 run(s) of these trials failed"), std::string::npos) << r.out;
}

TEST_F(CheckCliTest, BadExpectationsExitTwoBeforeAnythingRuns) {
  const fs::path file = write("bad.toml", kernel_file(4, "[[expect]]\nclaim = \"c\"\nmetric = \"forward\"\n"));
  const auto r = check(file);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: " + file.string() + ":14:1: unknown metric 'forward' for a kernel experiment");
  EXPECT_FALSE(fs::exists(db_));
  const fs::path plain = write("plain.toml", kernel_file(1, ""));
  const auto none = check(plain);
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err.substr(0, none.err.find('\n')),
            "error: " + plain.string() + " states no expectation");
  const auto format = check(write("x.toml", kernel_file(4, kHolds)), " --format csv");
  EXPECT_EQ(format.code, 2);
  EXPECT_EQ(format.err.substr(0, format.err.find('\n')),
            "error: --format must be table or json, found 'csv'");
}

// repeats = "auto": check runs the rounds until the claim is decided, then
// judges it with the sequential interval the rounds stopped on (a level above
// 95 %), not compare's.
TEST_F(CheckCliTest, AutoRepeatsStopWhenTheClaimIsDecided) {
  const fs::path file = write(
      "auto.toml", kernel_file(4, kHolds).replace(kernel_file(4, kHolds).find("repeats = 4"), 11,
                                                  "repeats = \"auto\"\nmax_repeats = 12"));
  const auto r = check(file, " --format json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json first = nlohmann::json::parse(r.out)["expectations"][0];
  EXPECT_EQ(first["verdict"], "holds");
  EXPECT_GT(first["confidence"].get<double>(), 0.95);
  const std::int64_t runs = query_int(db_, "SELECT count(*) FROM runs");
  EXPECT_LT(runs, 24) << "the rounds ran to max_repeats";
  EXPECT_EQ(first["runs"][0].get<std::int64_t>() * 2, runs);
}

}  // namespace
