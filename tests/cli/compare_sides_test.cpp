// What compare puts on a side (issue 36): --by never pools trials that
// differ in more than the compared key (refused with the --where that fixes
// it, or compared pair by pair with --pairs); the separate-blocks warning only
// for runs that really ran in blocks, never for the schedule `runner run`
// makes; and the help states the condition of a verdict. Runs recorded
// straight into a store, laid out in time as the scheduler plans them.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compare_fixture.hpp"
#include "runner/scheduler/plan.hpp"
#include "runner/store/store.hpp"
#include "support/cli_harness.hpp"

namespace {

using runner::test::record_finished;
using runner::test::Result;

// A trial to record: its resolved configuration and its sweep label.
struct TrialSpec {
  std::string config;
  std::string label;
};

class CompareSidesTest : public runner::test::CliTestBase {
 protected:
  CompareSidesTest() : CliTestBase("runner-compare-sides-") {}

  // Records `trials` as experiment `name`, `repeats` runs each in the order
  // the scheduler runs them (rounds, A1 B1 C1 A2 B2 C2 ...), starting at
  // `start_s` one second apart; returns the trial ids.
  std::vector<std::int64_t> record(const std::string& name, const std::vector<TrialSpec>& trials,
                                   int repeats, int start_s = 0) {
    std::vector<std::int64_t> ids;
    {
      runner::store::Store store = runner::store::Store::open(db_);
      const auto e = store.upsert_experiment(name, "/exp/" + name + ".toml", "[experiment]\n");
      const auto fingerprint = store.upsert_fingerprint("fp", R"({"host.hostname":"box"})");
      for (const TrialSpec& t : trials)
        ids.push_back(store.upsert_trial(e, t.config, t.config, t.config, t.label));
      for (const auto& planned : runner::interleave(trials.size(), repeats, false, 0)) {
        runner::store::RunStart start;
        start.trial_id = ids[planned.trial];
        start.fingerprint_id = fingerprint;
        record_finished(store, start, static_cast<int>(planned.repeat),
                        100e6 + 1e6 * static_cast<double>(planned.trial) +
                            1e5 * static_cast<double>(planned.repeat));
      }
    }
    // Start times one second apart in run order (begin_run writes now, in ms).
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "UPDATE runs SET started_at = strftime('%Y-%m-%dT%H:%M:%fZ', " +
        std::to_string(1'800'000'000 + start_s) +
        " + (SELECT count(*) FROM runs r2 WHERE r2.id < runs.id AND r2.trial_id IN (SELECT id FROM "
        "trials WHERE experiment_id = (SELECT id FROM experiments WHERE name = '" + name +
        "'))), 'unixepoch') WHERE trial_id IN (SELECT id FROM trials WHERE experiment_id = (SELECT "
        "id FROM experiments WHERE name = '" + name + "'))";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    return ids;
  }
  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, {}});
  }
  void expect_refused(const std::string& args, const std::string& err) const {
    const Result r = runner(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.err, err) << args;
  }
  static std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
};

// custom_kernels.toml in small: operators and shapes, each in three
// implementations (here two); scale has an option (factor) softmax lacks.
std::vector<TrialSpec> kernel_trials() {
  std::vector<TrialSpec> trials;
  const struct {
    std::string plugin, options, shape;
    int buffers;
  } cases[] = {{"scale", R"({"factor":2.5})", "[1024,1024]", 1},
               {"scale", R"({"factor":2.5})", "[1024,1024]", 0},
               {"softmax", "{}", "[8192,4096]", 0}};
  for (const auto& c : cases)
    for (const std::string impl : {"custom", "native"})
      trials.push_back({R"({"kernel":{"buffers":)" + std::to_string(c.buffers) + R"(,"impl":")" +
                            impl + R"(","options":)" + c.options + R"(,"plugin":")" + c.plugin +
                            R"(","shape":)" + c.shape + R"(},"kind":"kernel"})",
                        "kernel.plugin=\"" + c.plugin + "\" kernel.impl=\"" + impl + "\""});
  return trials;
}

// powersgd.toml in small: DDP's allreduce overlapped and after backward, and
// PowerSGD (a plugin with options allreduce lacks) at two ranks.
std::vector<TrialSpec> powersgd_trials() {
  const auto trial = [](const std::string& plugin, const std::string& options,
                        const std::string& reducer) {
    return TrialSpec{R"({"comm_hook":{"options":)" + options + R"(,"plugin":")" + plugin +
                         R"("},"distributed":{"reducer":")" + reducer + R"(","world_size":2}})",
                     ""};
  };
  return {trial("allreduce", "{}", "ddp"), trial("allreduce", "{}", "after_backward"),
          trial("powersgd", R"({"matrix_approximation_rank":1,"start_powerSGD_iter":10})", "ddp"),
          trial("powersgd", R"({"matrix_approximation_rank":2,"start_powerSGD_iter":10})", "ddp")};
}

// fused_ops_step.toml: two ops, each ATen's ("", the default) or runner's.
std::vector<TrialSpec> fused_trials() {
  std::vector<TrialSpec> four;
  for (const std::string norm : {"", "runner::layernorm"})
    for (const std::string act : {"", "runner::bias_gelu"})
      four.push_back({R"({"model":{"options":{"activation_op":")" + act + R"(","norm_op":")" + norm +
                          R"("},"plugin":"transformer_lm"}})",
                      ""});
  return four;
}

TEST_F(CompareSidesTest, ByRefusesToPoolTrialsThatDifferInAnotherKey) {
  record("kernels", kernel_trials(), 5);
  // Issue 36: --versus native put every operator and shape on each side.
  expect_refused("compare experiment:kernels --by kernel.impl --versus native",
                 "error: --by kernel.impl: a side would pool trials that differ in more than "
                 "kernel.impl (kernel.impl=custom: 3 trial(s), kernel.impl=native: 3 trial(s)); "
                 "they also differ in kernel.buffers (1, 0), kernel.plugin (scale, softmax), "
                 "kernel.shape ([1024, 1024], [8192, 4096])\n"
                 "hint: compare like with like: add --where kernel.buffers=1 --where "
                 "kernel.plugin=scale --where 'kernel.shape=[1024, 1024]' (one value of each), or "
                 "compare pair by pair with --pairs\n");
  // The --where of the hint compares one trial with one.
  const Result r = runner(
      "compare experiment:kernels --by kernel.impl --where kernel.buffers=1 --where "
      "kernel.plugin=scale --where \"kernel.shape=[1024, 1024]\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A: kernel.impl=custom (kernel.buffers=1, kernel.plugin=scale, "
                       "kernel.shape=[1024, 1024]) (5 finished run(s))\n"
                       "B: kernel.impl=native (kernel.buffers=1, kernel.plugin=scale, "
                       "kernel.shape=[1024, 1024]) (5 finished run(s))\n"),
            std::string::npos)
      << r.out;
  // report takes the same sides and refuses the same way; --pairs is compare's.
  const Result report = runner("report experiment:kernels --by kernel.impl --versus native --out " +
                               (dir_ / "pooled.html").string());
  EXPECT_EQ(report.code, 2);
  EXPECT_NE(report.err.find("error: --by kernel.impl: a side would pool trials that differ in more "
                            "than kernel.impl"),
            std::string::npos)
      << report.err;
  EXPECT_NE(report.err.find("(one value of each); 'runner compare' with these options and --pairs "
                            "compares pair by pair\n"),
            std::string::npos)
      << report.err;
  // Keys that vary only with the compared key's value are not pooling, but
  // are said: scale and softmax here ran at different shapes.
  const Result between = runner("compare experiment:kernels --by kernel.plugin --where "
                                "kernel.impl=custom --where kernel.buffers=0");
  ASSERT_EQ(between.code, 0) << between.err;
  EXPECT_NE(between.out.find(" (5 finished run(s))\nnote: the sides differ in more than "
                             "kernel.plugin: also in kernel.shape ([1024, 1024] -> [8192, "
                             "4096])\n\n"),
            std::string::npos)
      << between.out;
}

TEST_F(CompareSidesTest, TheEmptyStringIsShownQuotedAndWhereTakesIt) {
  record("fused", fused_trials(), 5);
  expect_refused("compare experiment:fused --by model.norm_op",
                 "error: --by model.norm_op: a side would pool trials that differ in more than "
                 "model.norm_op (model.norm_op=\"\": 2 trial(s), model.norm_op=runner::layernorm: 2 "
                 "trial(s)); they also differ in model.activation_op (\"\", runner::bias_gelu)\n"
                 "hint: compare like with like: add --where model.activation_op= (one value of "
                 "each), or compare pair by pair with --pairs\n");
  const Result r = runner("compare experiment:fused --by model.norm_op --where model.activation_op=");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A: model.norm_op=\"\" (model.activation_op=) (5 finished run(s))\n"),
            std::string::npos)
      << r.out;
}

TEST_F(CompareSidesTest, PairsComparesEachPairOfLikeTrials) {
  const auto ids = record("kernels", kernel_trials(), 5);
  Result r = runner("compare experiment:kernels --by kernel.impl --baseline native --versus custom --pairs");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("3 pair(s) of trials alike in every key but the compared one (the keys that "
                        "vary besides it: kernel.buffers, kernel.plugin, kernel.shape)\n",
                        0),
            0u)
      << r.out;
  const std::string first = "\n== pair 1 of 3: kernel.buffers=1 kernel.plugin=scale "
                            "kernel.shape=[1024, 1024] (trial:" + std::to_string(ids[1]) +
                            " vs trial:" + std::to_string(ids[0]) + ")\n"
                            "A: kernel.impl=native (5 finished run(s))\n"
                            "B: kernel.impl=custom (5 finished run(s))\n";
  EXPECT_NE(r.out.find(first), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n== pair 3 of 3: kernel.buffers=0 kernel.plugin=softmax "
                       "kernel.shape=[8192, 4096] (trial:" + std::to_string(ids[5]) +
                       " vs trial:" + std::to_string(ids[4]) + ")\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.out, "\nmetric "), 3u) << r.out;
  EXPECT_EQ(r.out.find("without a like trial"), std::string::npos) << r.out;
  r = runner("compare experiment:kernels --by kernel.impl --pairs --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\"pairs\":[{\"pair\":\"kernel.buffers=1 kernel.plugin=scale "
                        "kernel.shape=[1024, 1024]\",\"trial_a\":" + std::to_string(ids[0]) +
                            ",\"trial_b\":" + std::to_string(ids[1]) + ",\"comparison\":{\"a\":",
                        0),
            0u)
      << r.out;
  EXPECT_NE(r.out.find("],\"unmatched\":[],\"skipped\":[],\"regression\":false}\n"), std::string::npos) << r.out;
  r = runner("compare experiment:kernels --by kernel.impl --pairs --format csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("pair,trial_a,trial_b,metric,n_a,n_b,", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\n\"kernel.buffers=0 kernel.plugin=softmax kernel.shape=[8192, 4096]\"," +
                       std::to_string(ids[4]) + "," + std::to_string(ids[5]) + ",step_time,5,5,"),
            std::string::npos)
      << r.out;
  expect_refused("compare trial:1 trial:2 --pairs",
                 "error: --pairs needs --by KEY: it pairs the trials of one experiment:NAME\n"
                 "hint: e.g. runner compare experiment:custom_kernels --by kernel.impl --pairs\n");
}

TEST_F(CompareSidesTest, APluginsOptionsApplyOnlyToItsOwnTrials) {
  const auto ids = record("psgd", powersgd_trials(), 5);
  // Issue 36: --versus powersgd pooled ranks and allreduce's after_backward variant.
  expect_refused("compare experiment:psgd --by comm_hook.plugin",
                 "error: --by comm_hook.plugin: a side would pool trials that differ in more "
                 "than comm_hook.plugin (comm_hook.plugin=allreduce: 2 trial(s), "
                 "comm_hook.plugin=powersgd: 2 trial(s)); they also differ in "
                 "comm_hook.matrix_approximation_rank (1, 2), distributed.reducer (ddp, "
                 "after_backward)\n"
                 "hint: compare like with like: add --where comm_hook.matrix_approximation_rank=1 "
                 "--where distributed.reducer=ddp (one value of each), or compare pair by pair "
                 "with --pairs\n");
  // A --where on PowerSGD's option keeps allreduce's trials (they have no rank).
  Result r = runner("compare experiment:psgd --by comm_hook.plugin --where "
                    "comm_hook.matrix_approximation_rank=2 --where distributed.reducer=ddp");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A: comm_hook.plugin=allreduce (distributed.reducer=ddp) (5 finished run(s))\n"
                       "B: comm_hook.plugin=powersgd (comm_hook.matrix_approximation_rank=2, "
                       "distributed.reducer=ddp) (5 finished run(s))\n"),
            std::string::npos)
      << r.out;
  r = runner("compare experiment:psgd --by comm_hook.plugin --pairs");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\n== pair 2 of 2: comm_hook.matrix_approximation_rank=2 "
                       "distributed.reducer=ddp (trial:" + std::to_string(ids[0]) + " vs trial:" +
                       std::to_string(ids[3]) + ")\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nwithout a like trial on the other side: trial:" + std::to_string(ids[1]) +
                       " (comm_hook.plugin=allreduce distributed.reducer=after_backward)\n"),
            std::string::npos)
      << r.out;
  // A trial without finished runs (a sweep under way): its pair is named, not compared.
  std::int64_t idle = 0;
  {
    runner::store::Store store = runner::store::Store::open(db_);
    const std::string config = R"({"comm_hook":{"options":{"matrix_approximation_rank":4,)"
                               R"("start_powerSGD_iter":10},"plugin":"powersgd"},)"
                               R"("distributed":{"reducer":"ddp","world_size":2}})";
    idle = store.upsert_trial(*store.find_experiment("psgd", "[experiment]\n"), config, config,
                              config, "");
  }
  r = runner("compare experiment:psgd --by comm_hook.plugin --pairs");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("2 pair(s) of trials alike", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nno finished runs on a side, not compared: trial:" + std::to_string(ids[0]) +
                       " vs trial:" + std::to_string(idle) +
                       " (comm_hook.matrix_approximation_rank=4 distributed.reducer=ddp)\n"),
            std::string::npos)
      << r.out;
  expect_refused("compare experiment:psgd --by comm_hook.plugin --pairs --where "
                 "comm_hook.matrix_approximation_rank=4 --where distributed.reducer=ddp",
                 "error: side comm_hook.plugin=powersgd (comm_hook.matrix_approximation_rank=4, "
                 "distributed.reducer=ddp) has no finished runs\n"
                 "hint: runner runs lists what is recorded\n");
}

TEST_F(CompareSidesTest, SelectorsOfTrialsAndOfTwoExperimentsStillCompare) {
  const auto ids = record("kernels", kernel_trials(), 5);
  record("psgd", powersgd_trials(), 5, 1000);
  Result r = runner("compare trial:" + std::to_string(ids[0]) + " trial:" + std::to_string(ids[1]));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A: trial:" + std::to_string(ids[0]) + " (5 finished run(s))"), std::string::npos);
  r = runner("compare experiment:kernels experiment:psgd");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A: experiment:kernels (30 finished run(s))\nB: experiment:psgd (20 "
                       "finished run(s))\n"),
            std::string::npos)
      << r.out;
  // Recorded one after the other: separate blocks, and the warning says so.
  EXPECT_NE(r.out.find("WARNING: A and B ran in separate blocks of time, not interleaved "
                       "(interleaving 0.00; B's runs started "),
            std::string::npos)
      << r.out;
}

// Issue 36 item 3: the shipped sweeps, as the scheduler runs them, compared
// trial by trial and pooled, never read as separate blocks.
TEST_F(CompareSidesTest, ASweepRunInRoundsIsNeverSeparateBlocks) {
  // powersgd.toml's six trials and fused_ops_step.toml's four.
  std::vector<TrialSpec> six = powersgd_trials();
  six.push_back({R"({"comm_hook":{"options":{},"plugin":"fp16_compress"},)"
                 R"("distributed":{"reducer":"ddp"}})",
                 ""});
  six.push_back({R"({"comm_hook":{"options":{"matrix_approximation_rank":4},"plugin":"powersgd"},)"
                 R"("distributed":{"reducer":"ddp"}})",
                 ""});
  const auto p = record("powersgd", six, 5);
  const auto f = record("fused", fused_trials(), 5, 1000);
  const auto trial = [](std::int64_t id) { return "trial:" + std::to_string(id); };
  for (const auto* ids : {&p, &f})
    for (std::size_t i = 0; i < ids->size(); ++i)
      for (std::size_t j = i + 1; j < ids->size(); ++j) {
        const Result r = runner("compare " + trial((*ids)[i]) + " " + trial((*ids)[j]));
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out.find("separate blocks"), std::string::npos) << i << " " << j << "\n" << r.out;
      }
  // Pooled as the old headers did (old interleaving 0.36 and 0.44).
  for (const std::string& args :
       {"compare trial:" + std::to_string(p[0]) + "," + std::to_string(p[1]) + " trial:" +
            std::to_string(p[2]) + "," + std::to_string(p[3]) + "," + std::to_string(p[5]),
        "compare trial:" + std::to_string(f[0]) + "," + std::to_string(f[1]) + " trial:" +
            std::to_string(f[2]) + "," + std::to_string(f[3]),
        std::string("compare experiment:fused --by model.norm_op --pairs"),
        std::string("compare experiment:powersgd --by comm_hook.plugin --versus powersgd --pairs")}) {
    const Result r = runner(args);
    ASSERT_EQ(r.code, 0) << args << "\n" << r.err;
    EXPECT_EQ(r.out.find("separate blocks"), std::string::npos) << args << "\n" << r.out;
    const Result json = runner(args + " --format json");
    EXPECT_EQ(json.out.find("\"separate_blocks\":true"), std::string::npos) << args;
  }
}

TEST_F(CompareSidesTest, HelpStatesTheConditionOfAVerdict) {
  const Result r = runner("compare --help");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Verdicts: faster or slower only when the Mann-Whitney U test gives p < 0.05 "
                       "and the\nwhole 95% confidence interval of B/A lies beyond the margin"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("'undecided' means neither: the runs cannot tell a difference from\nnoise"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--pairs"), std::string::npos) << r.out;
}

}  // namespace
