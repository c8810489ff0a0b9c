// Two files of one configuration (issue 30 item 8): files that differ only in
// [experiment] name share their trials' runs (trial identity is the
// configuration's hash); the plan says so before it starts and counts them
// once, and experiment:NAME of either file selects those runs, in one store
// and after a merge.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;

const fs::path kGood = runner::test::test_plugins("good");

class SharedTrialsTest : public runner::test::CliTestBase {
 protected:
  SharedTrialsTest() : CliTestBase("runner-one-config-") {}

  Result runner(const std::string& args, const fs::path& db) const {
    return runner::test::run_runner(args, dir_, {db, kGood});
  }
  Result runner(const std::string& args) const { return runner(args, db_); }

  std::int64_t query(const std::string& sql, const fs::path& db) const {
    return runner::test::query_int(db, sql);
  }

  // Experiment `name`: two trials (lr 0.1 and 0.05), `repeats` repetitions;
  // the same configuration whatever the name.
  fs::path file(const std::string& name, int repeats = 3) const {
    return write(name + ".toml",
                 runner::test::tiny_experiment(
                     {.steps = 4,
                      .rest = "[experiment]\nname = \"" + name + "\"\nrepeats = " +
                              std::to_string(repeats) +
                              "\n\n[[trial]]\n\"optimizer.lr\" = 0.1\n\n[[trial]]\n"
                              "\"optimizer.lr\" = 0.05\n"}));
  }

  static bool has(const std::string& text, const std::string& needle) {
    return text.find(needle) != std::string::npos;
  }
};

TEST_F(SharedTrialsTest, TwoFilesOfOneConfigurationPlanRunAndSelectTheirSharedRuns) {
  const std::string both = "run " + file("a").string() + " " + file("b").string();

  const Result dry = runner(both + " --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_TRUE(has(dry.out, "b's trial #1 (new) is a's trial #1 (new): 3 runs shared\n"
                           "b's trial #2 (new) is a's trial #2 (new): 3 runs shared\n"
                           "6 of 12 runs would run, 6 shared; nothing was written\n"))
      << dry.out;
  EXPECT_TRUE(has(dry.out, "shared: a's trial #1 (new) runs it")) << dry.out;
  EXPECT_FALSE(fs::exists(db_));

  const Result r = runner(both);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "info experiments 'a', 'b' (train): 4 trial(s) x 3 repetition(s); "
                         "6 to run, 0 already done, 6 shared; database "))
      << r.err;
  EXPECT_TRUE(has(r.err, "info b's trial:3 is a's trial:1: 3 runs shared\n"
                         "info b's trial:4 is a's trial:2: 3 runs shared\n"))
      << r.err;
  EXPECT_TRUE(has(r.out, "a, b (train, 4 trial(s), 6 run(s) now, 0 skipped as done, 6 shared)"))
      << r.out;
  EXPECT_TRUE(has(r.err, "[6/6]")) << r.err;
  EXPECT_FALSE(has(r.err, "[7/")) << r.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs", db_), 6);
  // b's membership of its trials is its trial rows: the runs are a's.
  EXPECT_EQ(query("SELECT count(*) FROM trials JOIN experiments ON experiments.id = "
                  "trials.experiment_id WHERE experiments.name = 'b'", db_), 2);

  const Result compared = runner("compare experiment:a experiment:b");
  ASSERT_EQ(compared.code, 0) << compared.err;
  EXPECT_TRUE(has(compared.out, "A: experiment:a (6 finished run(s))\n"
                                "B: experiment:b (6 finished run(s))\n"
                                "note: experiment:a and experiment:b are the same runs: one "
                                "configuration, run once and shared (run both files with --force "
                                "for an A/A comparison)\n"))
      << compared.out;
  const Result trial = runner("compare trial:1 trial:3");
  ASSERT_EQ(trial.code, 0) << trial.err;
  EXPECT_TRUE(has(trial.out, "B: trial:3 (3 finished run(s))")) << trial.out;
  const Result exported = runner("export experiment:b --format csv");
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(std::count(exported.out.begin(), exported.out.end(), '\n'), 1 + 6) << exported.out;
  // Two selectors of one configuration give each run once.
  const Result together = runner("export experiment:a experiment:b trial:3 --format csv");
  ASSERT_EQ(together.code, 0) << together.err;
  EXPECT_EQ(std::count(together.out.begin(), together.out.end(), '\n'), 1 + 6);
  const Result report = runner("report experiment:b --out " + (dir_ / "b.html").string());
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_TRUE(has(report.out, ": 6 run(s);")) << report.out;

  // b alone afterwards: everything is done, and the plan says by whom.
  const Result alone = runner("run " + file("b").string());
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_TRUE(has(alone.err, "2 trial(s) x 3 repetition(s); 0 to run, 6 already done; database"))
      << alone.err;
  EXPECT_TRUE(has(alone.err, "info b's trial:3 is a's trial:1: 3 recorded runs shared\n"))
      << alone.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs", db_), 6);
  // a alone: b ran nothing of its own, so nothing of a is another's.
  const Result a_alone = runner("run " + file("a").string() + " --dry-run");
  ASSERT_EQ(a_alone.code, 0) << a_alone.err;
  EXPECT_FALSE(has(a_alone.out, "shared")) << a_alone.out;
}

TEST_F(SharedTrialsTest, AFileWhoseTrialsAnotherExperimentRecordedSaysSoAndSelectsThem) {
  ASSERT_EQ(runner("run " + file("a").string()).code, 0);
  const Result dry = runner("run " + file("b").string() + " --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_TRUE(has(dry.out, "b's trial #1 (new) is a's trial:1: 3 recorded runs shared\n"
                           "b's trial #2 (new) is a's trial:2: 3 recorded runs shared\n"
                           "0 of 6 runs would run; nothing was written\n"))
      << dry.out;
  // Before b is run, the store knows no experiment b.
  const Result unknown = runner("compare experiment:a experiment:b");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(has(unknown.err, "no experiment named 'b' in the database")) << unknown.err;
  ASSERT_EQ(runner("run " + file("b").string()).code, 0);
  EXPECT_EQ(query("SELECT count(*) FROM runs", db_), 6);
  const Result compared = runner("compare experiment:a experiment:b");
  ASSERT_EQ(compared.code, 0) << compared.err;
  EXPECT_TRUE(has(compared.out, "B: experiment:b (6 finished run(s))")) << compared.out;
}

// An A/A pair: --force runs each file's own repetitions, and each side
// selects its own.
TEST_F(SharedTrialsTest, WithForceEachFileRunsItsOwnRepetitions) {
  const std::string both = "run " + file("a").string() + " " + file("b").string() + " --force";
  const Result dry = runner(both + " --dry-run");
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_TRUE(has(dry.out, "\n12 of 12 runs would run; nothing was written\n")) << dry.out;
  EXPECT_FALSE(has(dry.out, "shared")) << dry.out;
  const Result r = runner(both);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "; 12 to run, 0 already done; database")) << r.err;
  EXPECT_FALSE(has(r.err, "shared")) << r.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE trial_id IN (3, 4)", db_), 6);
  const Result compared = runner("compare experiment:a experiment:b");
  ASSERT_EQ(compared.code, 0) << compared.err;
  EXPECT_TRUE(has(compared.out, "A: experiment:a (6 finished run(s))\n"
                                "B: experiment:b (6 finished run(s))\n\n"))
      << compared.out;
  EXPECT_FALSE(has(compared.out, "same runs")) << compared.out;
}

TEST_F(SharedTrialsTest, AFileWithMoreRepetitionsRunsOnlyThoseItself) {
  const Result r = runner("run " + file("a", 2).string() + " " + file("b", 3).string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "; 6 to run, 0 already done, 4 shared; database")) << r.err;
  EXPECT_TRUE(has(r.err, "info b's trial:3 is a's trial:1: 2 runs shared\n")) << r.err;
  // a's repetitions 0 and 1 of each trial, b's repetition 2 under b's own trial rows.
  EXPECT_EQ(query("SELECT count(*) FROM runs", db_), 6);
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE trial_id IN (3, 4) AND repeat_index = 2", db_),
            2);
  // One configuration, one set of runs: each side has all three repetitions.
  const Result compared = runner("compare trial:1 trial:3");
  ASSERT_EQ(compared.code, 0) << compared.err;
  EXPECT_TRUE(has(compared.out, "A: trial:1 (3 finished run(s))\n"
                                "B: trial:3 (3 finished run(s))\n"
                                "note: trial:1 and trial:3 are the same runs"))
      << compared.out;
}

TEST_F(SharedTrialsTest, AMergedStoreKeepsWhichExperimentsShareATrial) {
  const fs::path part = dir_ / "part.db";
  const fs::path all = dir_ / "all.db";
  ASSERT_EQ(runner("run " + file("a").string() + " " + file("b").string(), part).code, 0);
  const Result merged = runner("merge " + part.string() + " --into " + all.string(), all);
  ASSERT_EQ(merged.code, 0) << merged.err;
  EXPECT_EQ(query("SELECT count(*) FROM trials", all), 4);
  const Result compared = runner("compare experiment:a experiment:b", all);
  ASSERT_EQ(compared.code, 0) << compared.err;
  EXPECT_TRUE(has(compared.out, "A: experiment:a (6 finished run(s))\n"
                                "B: experiment:b (6 finished run(s))\n"))
      << compared.out;
}

}  // namespace
