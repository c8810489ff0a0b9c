// What a newcomer reads (issue 36 items 4, 5 and 8): one trial numbering in
// every output, `rerun` joining its run's trial, run tables that fit the
// terminal, diverged runs, the loss and eta of the progress line, `runs`
// saying when it cuts, and make_datasets.py checking its imports first.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;
using runner::test::slurp;

const fs::path kGood = runner::test::test_plugins("good");
using Cells = std::vector<std::string>;

class OutputCliTest : public runner::test::CliTestBase {
 protected:
  OutputCliTest() : CliTestBase("runner-output-") {}

  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, kGood});
  }
  // The runner with environment variables set first ("COLUMNS=60").
  Result runner_with(const std::string& env, const std::string& args) const {
    const fs::path out = dir_ / "out", err = dir_ / "err";
    const std::string cmd = env + " " + runner::test::runner_command(args, {db_, kGood}) + " >" +
                            out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  std::string query(const std::string& sql) const { return runner::test::query_text(db_, sql); }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The lines of `text` from the one starting with `first` up to the first empty
// one or the end.
std::vector<std::string> block(const std::string& text, const std::string& first) {
  std::vector<std::string> out;
  bool in = false;
  for (const auto& line : lines_of(text)) {
    if (!in && line.rfind(first, 0) == 0) in = true;
    if (in && line.empty()) break;
    if (in) out.push_back(line);
  }
  return out;
}

// Two cells of a table row, split at runs of two or more spaces.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  const std::regex gap(" {2,}");
  for (std::sregex_token_iterator it(line.begin(), line.end(), gap, -1), end; it != end; ++it) {
    std::string cell = *it;
    cell.erase(0, cell.find_first_not_of(' '));  // a right-aligned first cell
    if (!cell.empty()) out.push_back(cell);
  }
  return out;
}

const std::string kSweep = runner::test::tiny_experiment(
    {.steps = 5,
     .rest = "[experiment]\nname = \"swept\"\n\n[sweep]\n\"optimizer.lr\" = [0.01, 0.05]\n"});

// Issue 36 item 4: "runner run" printed "trial 1" for what `runs`, `compare
// trial:N` and `report trial:N` call trial 2. Every output now names a
// recorded trial by its store id, and one not yet recorded by its place in
// the file, marked new.
TEST_F(OutputCliTest, EveryOutputNamesATrialByTheIdCompareTakes) {
  // Another experiment first, so that the sweep's trials are rows 2 and 3.
  const fs::path other =
      write("other.toml", runner::test::tiny_experiment(
                              {.steps = 6, .rest = "[experiment]\nname = \"other\"\n"}));
  ASSERT_EQ(runner("run " + other.string()).code, 0);
  const fs::path file = write("swept.toml", kSweep);

  Result r = runner("validate " + file.string() + " --list-trials");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cells(block(r.out, "#")[1]).at(1), "new") << r.out;
  EXPECT_NE(r.out.find("#: the trial's position in the file; trial: the store's id (runner "
                       "compare trial:N, runner report trial:N); new: not recorded in " +
                       db_.string() + " yet\n"),
            std::string::npos)
      << r.out;
  r = runner("run " + file.string() + " --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto dry = block(r.out, "#");
  ASSERT_EQ(dry.size(), 7U) << r.out;
  EXPECT_EQ(cells(dry[0]), (Cells{"#", "trial", "optimizer.lr", "repeat", "action"}));
  EXPECT_EQ(cells(dry[1]), (Cells{"1", "#1 (new)", "0.01", "0", "run"}));
  EXPECT_EQ(cells(dry[2]), (Cells{"2", "#2 (new)", "0.05", "0", "run"}));
  EXPECT_EQ(dry[3], "trial: the store's id (runner compare trial:N, runner report trial:N)");
  EXPECT_EQ(dry[4], "#K (new): the file's K-th trial, not recorded yet");

  r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query("SELECT group_concat(id) FROM trials WHERE label LIKE 'optimizer.lr=%'"), "2,3");
  // The progress lines (plain log lines off a terminal).
  EXPECT_NE(r.err.find("] run 2 trial:2 (optimizer.lr=0.01) repeat 0 "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("] run 3 trial:3 (optimizer.lr=0.05) repeat 0 "), std::string::npos)
      << r.err;
  const auto table = block(r.out, "run ");
  ASSERT_EQ(table.size(), 5U) << r.out;
  EXPECT_EQ(cells(table[0]).at(1), "trial");
  EXPECT_EQ(cells(table[0]).at(2), "optimizer.lr");
  EXPECT_EQ(cells(table[1]).at(1), "2");
  EXPECT_EQ(cells(table[2]).at(1), "3");
  EXPECT_EQ(table[3], "trial: the store's id (runner compare trial:N, runner report trial:N)");

  r = runner("runs");
  EXPECT_EQ(cells(block(r.out, "run ")[1]).at(2), "3") << r.out;  // run 3, newest first
  r = runner("show 3");
  EXPECT_EQ(lines_of(r.out).at(0), "run 3  swept  (train, trial:3, repeat 0)") << r.out;
  EXPECT_EQ(lines_of(r.out).at(1), "trial:    optimizer.lr=0.05") << r.out;
  r = runner("validate " + file.string() + " --list-trials");
  EXPECT_EQ(cells(block(r.out, "#")[1]).at(1), "2") << r.out;
  EXPECT_EQ(cells(block(r.out, "#")[2]).at(1), "3") << r.out;
  r = runner("run " + file.string() + " --dry-run");
  EXPECT_EQ(cells(block(r.out, "#")[1]),
            (Cells{"1", "2", "0.01", "0", "skip: finished as run 2"}))
      << r.out;
  // The id printed is the one compare takes back.
  r = runner("compare trial:2 trial:3");
  EXPECT_NE(r.code, 2) << r.err;
}

// Issue 36 item 5: a rerun of an unchanged configuration made a new
// experiment row and a new trial; it adds a run to the run's own trial.
TEST_F(OutputCliTest, RerunOfAnUnchangedConfigurationAddsARunToItsTrial) {
  const fs::path file = write("swept.toml", kSweep);
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  const Result r = runner("rerun 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query("SELECT count(*) FROM experiments"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM trials"), "2");
  EXPECT_EQ(query("SELECT group_concat(id) FROM runs WHERE trial_id = 2"), "2,3");
  EXPECT_EQ(query("SELECT status FROM runs WHERE id = 3"), "finished");
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(\] run 3 trial:2 repeat 0 )"))) << r.err;
  // A trial's runs compare as one side: the rerun is among them.
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM runs WHERE trial_id = 2 AND "
                                         "status = 'finished'"),
            2);
}

// Issue 36 item 8: a [[trial]] list whose entries set many keys made the run
// table 300+ characters wide (every key in one column). Only the keys that
// tell the trials apart are columns, and a terminal too narrow for them gets
// a legend instead.
TEST_F(OutputCliTest, TheRunTableFitsTheTerminal) {
  std::string entries;
  for (int k = 1; k <= 2; ++k) {
    const std::string n = std::to_string(k);
    // Keys that change together: the first is enough to tell the entries apart.
    entries += "[[trial]]\n\"model.delay_us\" = " + n + ".0\n\"model.throw_at_step\" = 100" + n +
               "\n\"model.nan_at_step\" = 100" + n + "\n\"model.crash_at_step\" = 100" + n +
               "\n\"model.hang_at_step\" = 100" + n + "\n\"model.kill_at_step\" = 100" + n +
               "\n\"model.fail_rank\" = 10" + n +
               "\n\"data.batch_size\" = " + std::to_string(6 + k) + "\n\n";
  }
  const fs::path file =
      write("wide.toml", runner::test::tiny_experiment(
                             {.steps = 3, .rest = "[experiment]\nname = \"wide\"\n\n" + entries +
                                                  "[sweep]\n\"optimizer.lr\" = [0.01, 0.05]\n"}));
  Result r = runner_with("COLUMNS=200", "run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto table = block(r.out, "run ");
  ASSERT_EQ(table.size(), 7U) << r.out;
  EXPECT_EQ(cells(table[0]),
            (Cells{"run", "trial", "model.delay_us", "optimizer.lr", "repeat",
                                      "status", "step p50", "step p90", "samples/s",
                                      "loss (last 10)"}));
  EXPECT_EQ(cells(table[4]).at(2), "2.0");
  EXPECT_EQ(cells(table[4]).at(3), "0.05");
  for (std::size_t i = 0; i < 5; ++i) EXPECT_LE(table[i].size(), 200U) << table[i];
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(\] run 1 trial:1 \(model.delay_us=1.0 optimizer.lr=0.01\) repeat 0 )")))
      << r.err;

  // Narrower than the key columns (output not a terminal, no $COLUMNS: 100
  // characters): a legend under the table.
  for (const std::string env : {"env -u COLUMNS", "COLUMNS=80"}) {
    r = runner_with(env, "run " + file.string() + " --force");
    ASSERT_EQ(r.code, 0) << r.err;
    table = block(r.out, "run ");
    ASSERT_EQ(table.size(), 11U) << env << "\n" << r.out;
    table.pop_back();  // "recorded in PATH"
    EXPECT_EQ(cells(table[0]),
              (Cells{"run", "trial", "repeat", "status", "step p50", "step p90",
                                        "samples/s", "loss (last 10)"}));
    for (const auto& line : table) EXPECT_LE(line.size(), env == "COLUMNS=80" ? 80U : 100U) << line;
    EXPECT_EQ(cells(table[1]).at(1), "1");
    EXPECT_EQ(table[5], "trial 1: model.delay_us=1.0 optimizer.lr=0.01");
    EXPECT_EQ(table[8], "trial 4: model.delay_us=2.0 optimizer.lr=0.05");
  }
}

// A string value reads bare in the key columns and the progress line's
// label, as --by and --where take it.
TEST_F(OutputCliTest, StringValuesReadBare) {
  const fs::path file = write(
      "plugins.toml",
      runner::test::tiny_experiment(
          {.steps = 2,
           .rest = "[experiment]\nname = \"opt\"\n"
                   "[sweep]\n\"optimizer.plugin\" = [\"sgd\", \"copying_sgd\"]\n"}));
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto table = block(r.out, "run ");
  ASSERT_GE(table.size(), 3U) << r.out;
  EXPECT_EQ(cells(table[0]).at(2), "optimizer.plugin");
  EXPECT_EQ(cells(table[1]).at(2), "sgd");
  EXPECT_EQ(cells(table[2]).at(2), "copying_sgd");
  EXPECT_NE(r.err.find("trial:2 (optimizer.plugin=copying_sgd) repeat 0"), std::string::npos)
      << r.err;
}

// Issue 36 item 8 on a shipped sweep: amp.toml's [[trial]] entries set eight
// keys each; its dry run shows the two that tell its six trials apart and
// fits 100 columns.
TEST_F(OutputCliTest, TheAmpSweepsDryRunFitsAHundredColumns) {
  const Result r =
      runner_with("COLUMNS=100", "run " RUNNER_SOURCE_DIR "/experiments/amp.toml --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto table = block(r.out, "#");
  ASSERT_GE(table.size(), 8U) << r.out;
  EXPECT_EQ(cells(table[0]), (Cells{"#", "trial", "model.plugin", "train.precision",
                                                       "repeat", "action"}));
  EXPECT_EQ(cells(table[4]), (Cells{"4", "#4 (new)", "transformer_lm", "fp32", "0",
                                                       "run"}));
  // The table and its notes, up to "N of M runs would run".
  for (const auto& line : table) {
    if (line.find("runs would run") != std::string::npos) break;
    EXPECT_LE(line.size(), 100U) << line;
  }
}

// Issue 36 item 8: a diverged run showed "step p50 0 ns"; it says where it
// diverged and shows no statistics it does not have.
TEST_F(OutputCliTest, ADivergedRunSaysWhereInsteadOfZeroNanoseconds) {
  const fs::path file = write("nan.toml", runner::test::tiny_experiment(
                                              {.model = "nan_at_step = 1", .steps = 5, .warmup = 2,
                                               .rest = "[experiment]\nname = \"nan\"\n"}));
  const Result r = runner("run " + file.string());
  EXPECT_EQ(r.code, 1) << r.err;
  const auto table = block(r.out, "run ");
  ASSERT_GE(table.size(), 2U) << r.out;
  EXPECT_EQ(cells(table[1]), (Cells{"1", "1", "0", "diverged (loss is nan at step 1)",
                                                       "-", "-", "-", "-"}))
      << r.out;
  EXPECT_EQ(r.out.find(" 0 ns"), std::string::npos) << r.out;
}

// Issue 36 item 8: the progress line's loss (one step) and the table's "loss
// final" (a mean of 10) disagreed without saying why; both are now the mean
// of the last 10 steps, labelled so, and the run's last line agrees with the table.
TEST_F(OutputCliTest, TheProgressLineAndTheTableShowTheSameLoss) {
  const fs::path file = write("loss.toml", runner::test::tiny_experiment(
                                               {.optimizer = "lr = 0.05", .steps = 30, .warmup = 2,
                                                .rest = "[experiment]\nname = \"loss\"\n"}));
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(step 32/32  loss \(last 10\) (\S+) )")))
      << r.err;
  const auto table = block(r.out, "run ");
  ASSERT_GE(table.size(), 2U) << r.out;
  EXPECT_EQ(cells(table[0]).back(), "loss (last 10)");
  EXPECT_EQ(cells(table[1]).back(), m[1].str()) << r.out << r.err;
}

// Issue 36 item 8: the eta was set when a run started and froze until the
// next; it follows the steps done within the run.
TEST_F(OutputCliTest, TheEtaMovesWithinARun) {
  // 40 steps of 0.15 s: three progress lines (one every 2 s, and the last).
  const fs::path file = write("slow.toml", runner::test::tiny_experiment(
                                               {.model = "delay_us = 150000", .steps = 40,
                                                .rest = "[experiment]\nname = \"slow\"\n"}));
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> etas;
  const std::regex line(R"(\[1/1\] run 1 trial:1 repeat 0 eta (\S+) step (\d+)/40)");
  for (std::sregex_iterator it(r.err.begin(), r.err.end(), line), end; it != end; ++it)
    etas.push_back((*it)[1].str());
  ASSERT_GE(etas.size(), 2U) << r.err;
  EXPECT_NE(etas.front(), etas.back()) << r.err;
  EXPECT_EQ(etas.back(), "0s") << r.err;
}

// Issue 36 item 8: `runner runs` cut at 50 rows without a word.
TEST_F(OutputCliTest, RunsSaysWhenItShowsOnlySome) {
  const fs::path file = write(
      "three.toml", runner::test::tiny_experiment(
                        {.steps = 2, .rest = "[experiment]\nname = \"three\"\nrepeats = 3\n"}));
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  Result r = runner("runs --limit 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 4U) << r.out;
  EXPECT_EQ(lines_of(r.out).back(),
            "2 of 3 runs shown, the newest; --limit N for more, --all for every run");
  r = runner("runs --all");
  EXPECT_EQ(lines_of(r.out).size(), 4U) << r.out;
  EXPECT_EQ(r.out.find(" of 3 runs shown"), std::string::npos) << r.out;
  r = runner("runs --all --limit 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --all and --limit exclude each other\n"
                   "hint: --all lists every run; --limit N the newest N\n");
}

// Issue 36 item 8: make_datasets.py with a Python that lacks Pillow wrote
// three formats and died with a traceback. It checks its imports before
// writing anything and names the Python to use. (A PIL package that fails to
// import stands in for a missing one, whatever this machine has.)
TEST_F(OutputCliTest, MakeDatasetsChecksItsImportsBeforeWritingAnything) {
  RUNNER_REQUIRE_ORACLE("numpy");
  fs::create_directories(dir_ / "fake" / "PIL");
  runner::test::write_file(dir_ / "fake" / "PIL" / "__init__.py",
                           "raise ImportError('No module named PIL (test)')\n");
  const fs::path out = dir_ / "data";
  const std::string cmd = "PYTHONPATH=" + (dir_ / "fake").string() + " " +
                          runner::test::oracle_python().string() + " " RUNNER_SOURCE_DIR
                          "/scripts/make_datasets.py " + out.string() + " --train 4 --eval 2 >" +
                          (dir_ / "out").string() + " 2>" + (dir_ / "err").string();
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1);
  const std::string err = slurp(dir_ / "err");
  EXPECT_EQ(err.rfind("make_datasets.py: this Python (" + runner::test::oracle_python().string() +
                          ") cannot import Pillow; nothing was written. Run it with the set-up's "
                          "Python: ",
                      0),
            0U)
      << err;
  EXPECT_EQ(err.find("Traceback"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out));
  // Without image_folder, Pillow is not needed.
  const std::string npy = "PYTHONPATH=" + (dir_ / "fake").string() + " " +
                          runner::test::oracle_python().string() + " " RUNNER_SOURCE_DIR
                          "/scripts/make_datasets.py " + out.string() +
                          " --formats npy --train 4 --eval 2 >/dev/null 2>&1";
  EXPECT_EQ(std::system(npy.c_str()), 0);
  EXPECT_TRUE(fs::exists(out / "npy" / "train_inputs.npy"));
}

}  // namespace
