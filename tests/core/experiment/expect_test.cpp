// [[expect]] tables: parsed, resolved to the trials of each side, and every
// bad one refused at its file:line:col with the message users see.
#include <gtest/gtest.h>

#include <string>

#include "experiment_fixture.hpp"

namespace runner {
namespace {

using test::kMinimal;

class ExpectTest : public test::ExperimentFixture {
 protected:
  // kMinimal is 7 lines; the sweep is lines 8-10, [[expect]] is line 11, its keys from 12.
  static std::string with(const std::string& expect) {
    return kMinimal +
           "[sweep]\n\"model.activation\" = [\"relu\", \"gelu\"]\n\"data.workers\" = [0, 2]\n"
           "[[expect]]\n" +
           expect;
  }
  static std::string full(const std::string& extra) {
    return with("claim = \"gelu is no slower\"\nmetric = \"forward\"\nby = \"model.activation\"\n"
                "baseline = \"relu\"\nversus = \"gelu\"\n" +
                extra);
  }
  std::vector<Expectation> expectations(const std::string& text) {
    const std::vector<Trial> trials = expand(text);
    return *trials.front().experiment.expectations;
  }
};

TEST_F(ExpectTest, ReadsEveryKeyAndResolvesTheSides) {
  const auto list = expectations(
      full("source = \"an article\"\nwhere = { \"data.workers\" = 2 }\nequivalent_within = 0.05\n"));
  ASSERT_EQ(list.size(), 1u);
  const Expectation& e = list.front();
  EXPECT_EQ(e.claim, "gelu is no slower");
  EXPECT_EQ(e.source, "an article");
  EXPECT_EQ(e.metric, "forward");
  EXPECT_EQ(e.by, "model.activation");
  EXPECT_EQ(e.baseline, "\"relu\"");
  EXPECT_EQ(e.versus, "\"gelu\"");
  EXPECT_EQ(e.bound, ExpectBound::equivalent_within);
  EXPECT_DOUBLE_EQ(e.value, 0.05);
  EXPECT_EQ(e.at.line, 11);
  // Trials in expansion order, the last axis fastest: (relu,0) (relu,2) (gelu,0) (gelu,2).
  EXPECT_EQ(e.trials_a, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(e.trials_b, (std::vector<std::int64_t>{3}));
}

TEST_F(ExpectTest, WithoutWhereASidePoolsItsTrials) {
  const Expectation e = expectations(full("ratio_below = 1.1\n")).front();
  EXPECT_EQ(e.trials_a, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(e.trials_b, (std::vector<std::int64_t>{2, 3}));
}

TEST_F(ExpectTest, ValuesMatchAsCompareByReadsThem) {
  // A number named as text, as `compare --baseline 0` names it.
  const Expectation e = expectations(with("claim = \"c\"\nmetric = \"step_time\"\nby = \"data.workers\"\n"
                                          "baseline = \"0\"\nversus = 2\nratio_above = 0.5\n"))
                            .front();
  EXPECT_EQ(e.trials_a, (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(e.trials_b, (std::vector<std::int64_t>{1, 3}));
}

TEST_F(ExpectTest, AFileWithoutExpectationsHasNone) {
  const std::vector<Trial> trials = expand(kMinimal);
  EXPECT_EQ(trials.front().experiment.expectations, nullptr);
}

TEST_F(ExpectTest, ExpectationsAreNoPartOfTheIdentity) {
  // A claim added to a file keeps its trials' recorded runs.
  const std::string swept = kMinimal +
                            "[sweep]\n\"model.activation\" = [\"relu\", \"gelu\"]\n"
                            "\"data.workers\" = [0, 2]\n";
  EXPECT_EQ(expand(full("ratio_below = 2\n")).back().experiment.config_hash(),
            expand(swept).back().experiment.config_hash());
}

// --- errors ------------------------------------------------------------------

TEST_F(ExpectTest, UnknownMetricForTheKind) {
  const Error e = expand_error(with("claim = \"c\"\nmetric = \"optimiser\"\n"));
  EXPECT_EQ(std::string(e.what()),
            at(13, 1) + "unknown metric 'optimiser' for a train experiment; did you mean 'optimizer'?");
  EXPECT_EQ(e.hint().rfind("a train experiment records: step_time, data, h2d, forward, backward, "
                           "optimizer, comm, samples_per_s",
                           0),
            0u)
      << e.hint();
  // An inference loop has no optimizer phase.
  const Error infer = expand_error(
      "[experiment]\nkind = \"infer\"\n[model]\nplugin = \"mlp\"\n[data]\nplugin = \"synthetic\"\n"
      "[sweep]\n\"data.workers\" = [0, 2]\n[[expect]]\nclaim = \"c\"\nmetric = \"optimizer\"\n");
  EXPECT_EQ(std::string(infer.what()), at(11, 1) + "unknown metric 'optimizer' for an infer experiment");
}

TEST_F(ExpectTest, ByMustBeSwept) {
  const Error e = expand_error(
      with("claim = \"c\"\nmetric = \"forward\"\nby = \"data.batch_size\"\n"));
  EXPECT_EQ(std::string(e.what()),
            at(14, 1) + "'by' names 'data.batch_size', which this experiment does not sweep");
  EXPECT_EQ(e.hint(), "the two sides are two values of a swept key: model.activation, data.workers");
}

TEST_F(ExpectTest, BaselineAndVersusMustBeValuesOfTheSweep) {
  const Error e = expand_error(with("claim = \"c\"\nmetric = \"forward\"\nby = \"model.activation\"\n"
                                    "baseline = \"swish\"\nversus = \"gelu\"\nratio_below = 1\n"));
  EXPECT_EQ(std::string(e.what()), at(15, 1) + "no trial has model.activation = \"swish\"");
  EXPECT_EQ(e.hint(), "the sweep gives model.activation: \"gelu\", \"relu\"");
  const Error versus = expand_error(full("where = { \"data.workers\" = 2 }\nratio_below = 1\n")
                                        .replace(full("").find("versus = \"gelu\""), 15,
                                                 "versus = \"tanh\""));
  EXPECT_EQ(std::string(versus.what()),
            at(16, 1) + "no trial has model.activation = \"tanh\" where data.workers = 2");
  const Error same = expand_error(with("claim = \"c\"\nmetric = \"forward\"\nby = \"model.activation\"\n"
                                       "baseline = \"relu\"\nversus = \"relu\"\n"));
  EXPECT_EQ(std::string(same.what()),
            at(16, 1) + "baseline and versus are both \"relu\": the two sides must differ");
}

TEST_F(ExpectTest, WhereMustMatchATrial) {
  const Error e = expand_error(full("where = { \"data.workers\" = 5 }\nratio_below = 1\n"));
  EXPECT_EQ(std::string(e.what()), at(17, 11) + "no trial has data.workers = 5");
}

TEST_F(ExpectTest, ExactlyOneBound) {
  const Error none = expand_error(full(""));
  EXPECT_EQ(std::string(none.what()), at(11, 1) + "[[expect]] number 1 states no bound");
  EXPECT_EQ(none.hint(),
            "give exactly one of ratio_below, ratio_above, equivalent_within (e.g. ratio_below = "
            "0.5: B takes less than half of A)");
  const Error two = expand_error(full("ratio_below = 0.5\nratio_above = 0.2\n"));
  EXPECT_EQ(std::string(two.what()),
            at(18, 1) + "[[expect]] states both 'ratio_below' and 'ratio_above'");
}

TEST_F(ExpectTest, BoundsThatCannotBeMet) {
  EXPECT_THROW_MSG(static_cast<void>(expand(full("ratio_below = 0\n"))), Error,
                   at(17, 1) + "'expect.ratio_below' must be greater than 0, found 0");
  EXPECT_THROW_MSG(static_cast<void>(expand(full("ratio_above = -1.5\n"))), Error,
                   at(17, 1) + "'expect.ratio_above' must be greater than 0, found -1.5");
  const Error e = expand_error(full("equivalent_within = 0.0\n"));
  EXPECT_EQ(std::string(e.what()), at(17, 1) + "'expect.equivalent_within' must be greater than 0, found 0.0");
  EXPECT_EQ(e.hint(), "a fraction of A: 0.02 claims B within +/-2 % of A");
  EXPECT_THROW_MSG(static_cast<void>(expand(full("ratio_below = \"half\"\n"))), Error,
                   at(17, 1) + "'expect.ratio_below' must be a number, found a string");
}

TEST_F(ExpectTest, UnknownKey) {
  const Error e = expand_error(full("ratio_bellow = 0.5\n"));
  EXPECT_EQ(std::string(e.what()),
            at(17, 1) + "unknown key 'ratio_bellow' in [[expect]]; did you mean 'ratio_below'?");
  EXPECT_EQ(e.hint(), "an [[expect]] takes: claim, source, metric, by, baseline, versus, where, "
                      "ratio_below, ratio_above, equivalent_within");
}

TEST_F(ExpectTest, RequiredKeysAndTypes) {
  EXPECT_THROW_MSG(static_cast<void>(expand(with("metric = \"forward\"\n"))), Error,
                   at(11, 1) + "[[expect]] number 1 has no 'claim'");
  EXPECT_THROW_MSG(static_cast<void>(expand(with("claim = 3\n"))), Error,
                   at(12, 1) + "'expect.claim' must be a string, found an integer");
  EXPECT_THROW_MSG(static_cast<void>(expand("expect = 1\n" + kMinimal)), Error,
                   at(1, 10) + "'expect' must be an array of tables, found an integer");
}

}  // namespace
}  // namespace runner
