// What `runner run --dry-run` and the plan line of `runner run` say about
// the comparisons an experiment file's comments print: whether the planned
// repetitions can reach p < 0.05, and when compare would not take them
// (issue 35: a file must not suggest a comparison it cannot decide).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;

const fs::path kGood = runner::test::test_plugins("good");

class ImpliedComparisonsTest : public runner::test::CliTestBase {
 protected:
  ImpliedComparisonsTest() : CliTestBase("runner-implied-") {}

  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, kGood});
  }

  // A sweep of optimizer.lr (and `more` sweep lines) with `repeats`
  // repetitions, `header` as its first lines.
  fs::path sweep_file(const std::string& header, int repeats, const std::string& more = "") const {
    return write("sweep.toml",
                 header + runner::test::tiny_experiment(
                              {.steps = 3,
                               .rest = "[experiment]\nname = \"tiny\"\nrepeats = " +
                                       std::to_string(repeats) +
                                       "\n[sweep]\n\"optimizer.lr\" = [0.1, 0.01]\n" + more}));
  }
};

TEST_F(ImpliedComparisonsTest, DryRunSaysWhetherTheHeadersComparisonCanBeDecided) {
  const std::string header =
      "# A header that suggests a comparison.\n"
      "#\n"
      "#   runner compare experiment:tiny --by optimizer.lr --versus 0.01   # the smaller rate\n"
      "#   runner compare experiment:other --by optimizer.lr\n";
  const fs::path two = sweep_file(header, 2);
  const Result few = runner("run " + two.string() + " --dry-run");
  ASSERT_EQ(few.code, 0) << few.err;
  // The other experiment's command is not this file's to decide.
  EXPECT_NE(few.out.find("2 repetitions a trial: a comparison of two trials cannot reach p < 0.05 "
                         "(4 is the least, 5+ recommended)\n" +
                         two.string() +
                         ":3: runner compare experiment:tiny --by optimizer.lr --versus 0.01\n"
                         "  optimizer.lr=0.1 vs optimizer.lr=0.01: 2 runs a side cannot reach p < 0.05 "
                         "(smallest two-sided p 0.33); 4 is the least, 5+ recommended\n"),
            std::string::npos)
      << few.out;
  EXPECT_EQ(few.out.find("experiment:other"), std::string::npos) << few.out;

  const fs::path four = sweep_file(header, 4);
  const Result enough = runner("run " + four.string() + " --dry-run");
  ASSERT_EQ(enough.code, 0) << enough.err;
  EXPECT_NE(enough.out.find("  optimizer.lr=0.1 vs optimizer.lr=0.01: 4 runs a side can reach p < 0.05 "
                            "(smallest two-sided p 0.029)\n"),
            std::string::npos)
      << enough.out;
  EXPECT_FALSE(fs::exists(db_));
}

// A command continued over two comment lines is one comparison; one that
// would pool trials differing in another swept key gets compare's refusal,
// and with --pairs the pairs of like trials are counted.
TEST_F(ImpliedComparisonsTest, ContinuedCommandsAndSidesThatPoolUnlikeTrials) {
  const std::string header =
      "#   runner compare experiment:tiny --by optimizer.lr \\\n"
      "#       --where train.steps=3\n"
      "#   runner compare experiment:tiny --by optimizer.lr\n"
      "#   runner compare experiment:tiny --by optimizer.lr --pairs\n";
  const fs::path file = sweep_file(header, 5, "\"train.steps\" = [3, 4]\n");
  const Result dry = runner("run " + file.string() + " --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find(file.string() +
                         ":1: runner compare experiment:tiny --by optimizer.lr --where "
                         "train.steps=3\n"
                         "  optimizer.lr=0.1 (train.steps=3) vs optimizer.lr=0.01 (train.steps=3): "
                         "5 runs a side can reach p < 0.05 (smallest two-sided p 0.0079)\n" +
                         file.string() +
                         ":3: runner compare experiment:tiny --by optimizer.lr\n"
                         "  compare would refuse it: --by optimizer.lr: a side would pool trials "
                         "that differ in more than optimizer.lr (optimizer.lr=0.1: 2 trial(s), "
                         "optimizer.lr=0.01: 2 trial(s)); they also differ in train.steps (3, 4); "
                         "compare like with like: add --where train.steps=3 (one value of each), "
                         "or compare pair by pair with --pairs\n" +
                         file.string() +
                         ":4: runner compare experiment:tiny --by optimizer.lr --pairs\n"
                         "  optimizer.lr=0.1 vs optimizer.lr=0.01, 2 pairs: 5 runs a side can "
                         "reach p < 0.05 (smallest two-sided p 0.0079)\n"),
            std::string::npos)
      << dry.out;
}

// The plan line of a real run says the same before the first run starts.
TEST_F(ImpliedComparisonsTest, ThePlanLineSaysItToo) {
  const fs::path file = sweep_file(
      "#   runner compare experiment:tiny --by optimizer.lr --baseline 0.01 --versus 0.1\n", 1);
  const Result run = runner("run " + file.string());
  ASSERT_EQ(run.code, 0) << run.err;
  const auto plan = run.err.find("2 trial(s) x 1 repetition(s)");
  const auto said = run.err.find(
      "optimizer.lr=0.01 vs optimizer.lr=0.1: 1 run a side cannot reach p < 0.05 (smallest two-sided p 1.0); "
      "4 is the least, 5+ recommended");
  ASSERT_NE(plan, std::string::npos) << run.err;
  ASSERT_NE(said, std::string::npos) << run.err;
  EXPECT_LT(plan, said);
  EXPECT_LT(said, run.err.find("[1/2] run"));
}

}  // namespace
