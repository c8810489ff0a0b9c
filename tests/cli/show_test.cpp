// End to end: `runner show RUN` on a database written through the store,
// checking the weights files and the evaluation table (schema 5) as printed.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runner/store/store.hpp"
#include "support/cli_harness.hpp"

namespace {

using runner::store::RunStatus;
using runner::test::Result;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class ShowCliTest : public runner::test::CliTestBase {
 protected:
  ShowCliTest() : CliTestBase("runner-show-cli-") {}

  Result show(std::int64_t run) const {
    runner::test::RunnerPaths paths;
    paths.db = db_;
    return runner::test::run_runner("show " + std::to_string(run), dir_, paths);
  }

  /// Records a finished run with a metric and the given evaluations and files.
  std::int64_t record(const std::vector<runner::store::Evaluation>& evaluations,
                      const std::vector<runner::store::RunFile>& files) const {
    runner::store::Store store = runner::store::Store::open(db_);
    const auto e = store.upsert_experiment("lm", "/exp/lm.toml", "[experiment]\n");
    runner::store::RunStart start;
    start.trial_id = store.upsert_trial(e, "{}", "cfg", "id", "");
    start.fingerprint_id = store.upsert_fingerprint("fp", R"({"host.hostname":"box"})");
    start.repeat_index = next_repeat_++;
    const auto run = store.begin_run(start);
    store.finish_run(run, RunStatus::finished, "", {}, {{"final_loss", 0.5, ""}}, 0, evaluations,
                     files);
    return run;
  }

  mutable std::int64_t next_repeat_ = 0;
};

TEST_F(ShowCliTest, PrintsTheWeightsFilesAndOneEvaluationRowPerStep) {
  const std::string sha_in = "abcdef0123456789" + std::string(48, 'a');
  const std::string sha_out = "0011223344556677" + std::string(48, 'b');
  const std::int64_t run = record(
      {{50, "loss", 2.5},
       {50, "accuracy", 0.375},
       {50, "perplexity", kNaN},  // stored as NULL, shown as "-"
       {100, "loss", 1.25},
       {100, "accuracy", 0.625},
       {100, "bad\x1b[31m", 7}},  // a metric name with an escape sequence
      {{"save_to", "/w/out.safetensors", sha_out, 2048, ""},
       {"init_from", "/w/in.safetensors", sha_in, 1024, ""}});
  const Result r = show(run);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Columns by metric name; "-" where a metric has no value at a step.
  const std::string evaluations =
      "\neval step  accuracy  bad\\e[31m  loss  perplexity\n"
      "       50     0.375          -   2.5           -\n"
      "      100     0.625          7  1.25           -\n";
  // The role, the first 16 hex digits of the SHA-256, the size in bytes, the path.
  const std::string weights =
      "\nfile       sha256            bytes  path\n"
      "init_from  abcdef0123456789   1024  /w/in.safetensors\n"
      "save_to    0011223344556677   2048  /w/out.safetensors\n";
  const auto metrics_at = r.out.find("\nfinal_loss ");
  const auto weights_at = r.out.find(weights);
  const auto evaluations_at = r.out.find(evaluations);
  const auto fingerprint_at = r.out.find("\nfingerprint ");
  ASSERT_NE(metrics_at, std::string::npos) << r.out;
  ASSERT_NE(weights_at, std::string::npos) << r.out;
  ASSERT_NE(evaluations_at, std::string::npos) << r.out;
  // After the metrics: weights, then evaluations, then the fingerprint.
  EXPECT_LT(metrics_at, weights_at) << r.out;
  EXPECT_LT(weights_at, evaluations_at) << r.out;
  EXPECT_LT(evaluations_at, fingerprint_at) << r.out;
  for (const char c : r.out) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20);
}

TEST_F(ShowCliTest, ARunWithoutEvaluationsOrFilesShowsNeither) {
  const std::int64_t run = record({}, {});
  const Result r = show(run);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nfinal_loss "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("eval step"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nfile "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nfingerprint "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  host.hostname = box\n"), std::string::npos) << r.out;
}

TEST_F(ShowCliTest, ARunRecordedWithoutAFingerprintIsShown) {
  std::int64_t run = 0;
  {
    runner::store::Store store = runner::store::Store::open(db_);
    runner::store::RunStart start;
    const auto experiment = store.upsert_experiment("lm", "", "text");
    start.trial_id = store.upsert_trial(experiment, "{}", "c", "i", "");
    run = store.begin_run(start);  // fingerprint_id 0: none
    store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {{10, "loss", 1.5}});
  }
  const Result r = show(run);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\neval step  loss\n       10   1.5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nfingerprint: none recorded\n"), std::string::npos) << r.out;
}

TEST_F(ShowCliTest, StoredTextInTheNewTablesIsEscaped) {
  // Another client wrote control characters into a path.
  const std::int64_t run = record(
      {{10, "loss", 1}}, {{"init_from", "/w/a\rb\x1b[2J.safetensors", std::string(64, 'c'), 1, ""}});
  const Result r = show(run);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("init_from  cccccccccccccccc      1  /w/a\\rb\\e[2J.safetensors\n"),
            std::string::npos)
      << r.out;
}

}  // namespace
