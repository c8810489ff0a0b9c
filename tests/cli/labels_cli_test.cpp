// Run labels (issue 34): --label and [experiment] labels recorded with every
// run, the command line over the file, commit from the CI's variables; never
// the identity (one trial, one series, whatever the labels); resume counts
// the runs at the same labels only; shown by show, selected by
// label:KEY=VALUE (runs, export), exported as label.KEY (CSV, JSON,
// parquet), carried by merge;
// bad labels and selectors exit 2 with exact messages.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;

const fs::path kGood = runner::test::test_plugins("good");

class LabelsCliTest : public runner::test::CliTestBase {
 protected:
  LabelsCliTest() : CliTestBase("runner-labels-") {
    // The CI this suite may run under sets them; each test sets its own.
    for (const char* name : {"RUNNER_LABEL_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA"}) ::unsetenv(name);
  }
  ~LabelsCliTest() override {
    for (const char* name : {"RUNNER_LABEL_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA"}) ::unsetenv(name);
  }

  Result runner(const std::string& args, const fs::path& db) const {
    return runner::test::run_runner(args, dir_, {db, kGood});
  }
  Result runner(const std::string& args) const { return runner(args, db_); }

  std::string text(const std::string& sql, const fs::path& db) const {
    return runner::test::query_text(db, sql);
  }
  std::string text(const std::string& sql) const { return text(sql, db_); }

  // Experiment "lab": one trial, `repeats` repetitions of 3 steps, then `experiment` lines.
  fs::path file(const std::string& name, const std::string& experiment, int repeats = 2) const {
    return write(name, runner::test::tiny_experiment(
                           {.steps = 3,
                            .rest = "[experiment]\nname = \"lab\"\nrepeats = " +
                                    std::to_string(repeats) + "\n" + experiment}));
  }

  // A run's labels as "k=v k=v", by key.
  std::string labels_of(std::int64_t run, const fs::path& db) const {
    return text("SELECT group_concat(name || '=' || value, ' ') FROM (SELECT name, value FROM "
                "run_labels WHERE run_id = " + std::to_string(run) + " ORDER BY name)", db);
  }

  static bool has(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
  }
};

TEST_F(LabelsCliTest, RecordedShownSelectedExportedAndMergedWithoutChangingTheSeries) {
  const fs::path f = file("lab.toml", "labels = { branch = \"main\", build = \"7\" }\n");
  Result r = runner("run " + f.string() + " --label commit=abc123 --label build=8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "info lab: runs labelled branch=main build=8 commit=abc123\n")) << r.err;
  // The command line's build=8 over the file's build=7.
  EXPECT_EQ(labels_of(1, db_), "branch=main build=8 commit=abc123");
  EXPECT_EQ(labels_of(2, db_), "branch=main build=8 commit=abc123");

  // Another commit: its own repetitions, in the same trial (one series).
  r = runner("run " + f.string() + " --label commit=def456");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "2 to run, 0 already done")) << r.err;
  EXPECT_EQ(labels_of(3, db_), "branch=main build=7 commit=def456");
  // At the same labels again, nothing is left to run.
  r = runner("run " + f.string() + " --label commit=def456");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "0 to run, 2 already done")) << r.err;
  EXPECT_EQ(text("SELECT count(*) FROM runs"), "4");
  EXPECT_EQ(text("SELECT count(*) FROM trials"), "1");
  EXPECT_EQ(text("SELECT count(DISTINCT trial_id) FROM runs"), "1");

  r = runner("show 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\nlabels:   branch=main build=8 commit=abc123\n")) << r.out;

  r = runner("runs label:commit=def456");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\n  4  lab") && has(r.out, "\n  3  lab")) << r.out;
  EXPECT_FALSE(has(r.out, "\n  1  lab") || has(r.out, "\n  2  lab")) << r.out;

  const fs::path csv = dir_ / "runs.csv";
  r = runner("export label:commit=abc123 label:build=7 --what runs --format csv --out " +
             csv.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string table = runner::test::slurp(csv);
  const std::string header = table.substr(0, table.find('\n'));
  EXPECT_TRUE(has(header, ",label.branch,label.build,label.commit\r")) << header;
  EXPECT_TRUE(has(table, ",main,8,abc123\r\n")) << table;
  EXPECT_TRUE(has(table, ",main,7,def456\r\n")) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 5) << table;  // header + 4 runs

  const fs::path json = dir_ / "samples.json";
  r = runner("export label:commit=def456 --what summaries --format json --out " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(runner::test::slurp(json), "\"label.commit\":\"def456\"")) << r.out;

  // Parquet: the same label.* columns, typed string (pyarrow reads them back).
  if (!std::string(RUNNER_PYTHON).empty()) {
    ::setenv("RUNNER_PYTHON", RUNNER_PYTHON, 1);
    const fs::path parquet = dir_ / "runs.parquet";
    r = runner("export label:commit=def456 --format parquet --out " + parquet.string());
    if (r.err.find("needs pyarrow") == std::string::npos) {
      ASSERT_EQ(r.code, 0) << r.err;
      const fs::path read = dir_ / "read.txt";
      const std::string command =
          std::string(RUNNER_PYTHON) +
          " -c \"import pyarrow.parquet as pq, sys; t = pq.read_table(sys.argv[1]); "
          "print(t.schema.field('label.commit').type, t.column('label.commit').to_pylist(), "
          "t.column('label.build').to_pylist())\" " +
          parquet.string() + " > " + read.string();
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
      EXPECT_EQ(runner::test::slurp(read), "string ['def456', 'def456'] ['7', '7']\n");
    }
    ::unsetenv("RUNNER_PYTHON");
  }

  const fs::path all = dir_ / "all.db";
  r = runner("merge " + db_.string() + " --into " + all.string(), {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\nrun_labels         12                0\n")) << r.out;
  EXPECT_EQ(text("SELECT count(*) FROM run_labels", all), "12");
  EXPECT_EQ(text("SELECT group_concat(value, ' ') FROM (SELECT value FROM run_labels JOIN runs "
                 "ON runs.id = run_labels.run_id WHERE name = 'commit' ORDER BY uuid)", all),
            text("SELECT group_concat(value, ' ') FROM (SELECT value FROM run_labels JOIN runs "
                 "ON runs.id = run_labels.run_id WHERE name = 'commit' ORDER BY uuid)"));
  r = runner("runs label:commit=abc123", all);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3) << r.out;  // header + 2 runs
}

TEST_F(LabelsCliTest, CommitComesFromTheEnvironmentAndNeverChangesTheIdentity) {
  const fs::path f = file("lab.toml", "", 1);
  Result r = runner("run " + f.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(labels_of(1, db_), "");
  ::setenv("CI_COMMIT_SHA", "c0ffee", 1);
  r = runner("run " + f.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(labels_of(2, db_), "commit=c0ffee");
  ::setenv("GITHUB_SHA", "9a1b", 1);
  ::setenv("RUNNER_LABEL_COMMIT", "r42", 1);
  r = runner("run " + f.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(labels_of(3, db_), "commit=r42");
  // Given explicitly, the variables are not read.
  r = runner("run " + f.string() + " --label commit=mine");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(labels_of(4, db_), "commit=mine");
  // A file with labels of its own is a new experiment row, not a new configuration.
  const fs::path g = file("lab2.toml", "labels = { branch = \"dev\" }\n", 1);
  r = runner("run " + g.string() + " --label commit=other");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(labels_of(5, db_), "branch=dev commit=other");
  EXPECT_EQ(text("SELECT count(*) FROM runs"), "5");
  EXPECT_EQ(text("SELECT count(DISTINCT trial_id) FROM runs WHERE id <= 4"), "1");
  EXPECT_EQ(text("SELECT count(DISTINCT identity) || ' ' || count(DISTINCT config_hash) "
                 "FROM trials"),
            "1 1");
  EXPECT_EQ(text("SELECT count(DISTINCT t.identity) FROM runs JOIN trials AS t ON t.id = "
                 "runs.trial_id"),
            "1");
  ::setenv("RUNNER_LABEL_COMMIT", "bad\x1b[0m", 1);
  r = runner("run " + f.string() + " --force");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: the label commit from $RUNNER_LABEL_COMMIT must be printable text (no "
            "control characters, UTF-8)");
  EXPECT_EQ(text("SELECT count(*) FROM runs"), "5");
}

TEST_F(LabelsCliTest, BadLabelsAndSelectorsExit2WithExactMessages) {
  const fs::path f = file("lab.toml", "", 1);
  std::string runs_before = "0";
  const auto refused = [&](const std::string& args, const std::string& message) {
    const Result r = runner(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "error: " + message) << args;
    EXPECT_FALSE(fs::exists(db_) && text("SELECT count(*) FROM runs") != runs_before) << args;
  };
  const std::string run = "run " + f.string();
  refused(run + " --label commit", "--label commit: expected KEY=VALUE");
  refused(run + " --label 'my key=1'",
          "--label my key=1: the key 'my key' may hold only letters, digits, '_', '-' and '.'");
  refused(run + " --label 1x=1", "--label 1x=1: the key '1x' must start with a letter");
  refused(run + " --label commit=", "--label commit=: the value of 'commit' must not be empty");
  refused(run + " --label commit=" + std::string(257, 'a'),
          "--label commit=" + std::string(257, 'a') +
              ": the value of 'commit' is longer than 256 bytes");
  refused(run + " --label commit=a --label commit=b",
          "--label commit is given twice ('a', then 'b')");

  expect_refused(file("k.toml", "labels = { \"my key\" = \"x\" }\n"), "\"my key\" = \"x\"",
                 "label key 'my key' in 'experiment.labels' may hold only letters, digits, '_', "
                 "'-' and '.'");
  expect_refused(file("v.toml", "labels = { build = 7 }\n"), "build = 7",
                 "'experiment.labels.build' must be a string, found an integer");
  expect_refused(file("e.toml", "labels = { build = \"\" }\n"), "build = \"\"",
                 "'experiment.labels.build' must not be empty");
  expect_refused(file("t.toml", "labels = \"main\"\n"), "labels = \"main\"",
                 "'experiment.labels' must be a table of KEY = \"value\", found a string");

  ASSERT_EQ(runner(run + " --label commit=abc").code, 0);
  runs_before = "1";
  refused("runs label:commit", "cannot read the selector 'label:commit': expected label:KEY=VALUE");
  refused("runs label:=x", "cannot read the selector 'label:=x': expected label:KEY=VALUE");
  refused("runs label:commit=", "cannot read the selector 'label:commit=': expected label:KEY=VALUE");
  refused("runs label:commit=zzz", "'label:commit=zzz' matches no run in the database");
  refused("export label:commit=zzz --format csv",
          "'label:commit=zzz' matches no run in the database");
}

}  // namespace
