// [experiment] repeats = "auto" with min_repeats, max_repeats and
// time_budget: their defaults, and each mistake refused at its file:line:col.
#include "experiment_fixture.hpp"

namespace runner {
namespace {

using AutoRepeatsKeysTest = test::ExperimentFixture;

TEST_F(AutoRepeatsKeysTest, AutoHasItsDefaultsAndPlansUpToMaxRepeats) {
  const Experiment e = load("[experiment]\nrepeats = \"auto\"\n" + test::kMinimal);
  EXPECT_TRUE(e.auto_repeats);
  EXPECT_EQ(e.min_repeats, 3);
  EXPECT_EQ(e.max_repeats, 30);
  EXPECT_EQ(e.repeats, 30);
  EXPECT_FALSE(e.time_budget_s.has_value());
  const Experiment fixed = load("[experiment]\nrepeats = 4\n" + test::kMinimal);
  EXPECT_FALSE(fixed.auto_repeats);
  EXPECT_EQ(fixed.repeats, 4);
  // The limits are no part of a trial's identity: a rerun with a higher
  // max_repeats continues the same trials' rounds.
  EXPECT_EQ(e.config_hash(), fixed.config_hash());
}

TEST_F(AutoRepeatsKeysTest, LimitsAndABudgetAreRead) {
  const Experiment e = load(
      "[experiment]\nrepeats = \"auto\"\nmin_repeats = 5\nmax_repeats = 8\ntime_budget = \"20m\"\n" +
      test::kMinimal);
  EXPECT_EQ(e.min_repeats, 5);
  EXPECT_EQ(e.max_repeats, 8);
  EXPECT_EQ(e.repeats, 8);
  ASSERT_TRUE(e.time_budget_s.has_value());
  EXPECT_EQ(*e.time_budget_s, 1200.0);
}

TEST_F(AutoRepeatsKeysTest, MistakesAreRefusedAtTheirPosition) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[experiment]\nrepeats = \"auto\"\nmin_repeats = 10\nmax_repeats = 5\n",
       at(3, 15) + "'experiment.min_repeats' (10) is more than 'experiment.max_repeats' (5)"},
      {"[experiment]\nrepeats = \"auto\"\nmax_repeats = 2\n",
       at(3, 15) + "'experiment.min_repeats' (3) is more than 'experiment.max_repeats' (2)"},
      {"[experiment]\nrepeats = \"auto\"\nmin_repeats = 1\n",
       at(3, 15) + "'experiment.min_repeats' must be between 2 and 10000, found 1"},
      {"[experiment]\nrepeats = \"auto\"\nmax_repeats = 10001\n",
       at(3, 15) + "'experiment.max_repeats' must be between 2 and 10000, found 10001"},
      {"[experiment]\nmin_repeats = 5\n",
       at(2, 15) + "'experiment.min_repeats' is only read with repeats = \"auto\""},
      {"[experiment]\nrepeats = 5\nmax_repeats = 9\n",
       at(3, 15) + "'experiment.max_repeats' is only read with repeats = \"auto\""},
      {"[experiment]\ntime_budget = \"1h\"\n",
       at(2, 15) + "'experiment.time_budget' is only read with repeats = \"auto\""},
      {"[experiment]\nrepeats = \"auto\"\ntime_budget = \"0.5s\"\n",
       at(3, 15) + "'experiment.time_budget' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found \"0.5s\""},
      {"[experiment]\nrepeats = \"auto\"\ntime_budget = \"soon\"\n",
       at(3, 15) + "'experiment.time_budget' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found \"soon\""},
      {"[experiment]\nrepeats = \"many\"\n",
       at(2, 11) + "'experiment.repeats' must be a count between 1 and 10000 or \"auto\", found "
                   "\"many\""},
      {"[experiment]\nrepeats = 0\n", at(2, 11) + "'experiment.repeats' must be between 1 and 10000, found 0"},
  };
  for (const auto& [text, message] : cases)
    EXPECT_EQ(std::string(error_of(text + test::kMinimal).what()), message) << text;
}

TEST_F(AutoRepeatsKeysTest, TheLimitsAreTheSameForEveryTrial) {
  EXPECT_EQ(std::string(expand_error("[experiment]\nrepeats = \"auto\"\n" + test::kMinimal +
                                     "[sweep]\n\"experiment.max_repeats\" = [5, 6]\n")
                            .what()),
            at(11, 1) + "'experiment.max_repeats' cannot vary between trials");
}

}  // namespace
}  // namespace runner
