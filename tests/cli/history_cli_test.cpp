// runner history end to end, on stores whose runs are written through the
// store API (so a series' levels are exactly what a test says, in well under
// a second): the change point at the commit that slowed down, along a label,
// a fingerprint key and time; --order; the --fail-on regression gate; the
// formats; bad selectors, axes and metrics (exit 2 with their messages).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/store/store.hpp"
#include "support/cli_harness.hpp"

namespace {

using nlohmann::json;
using runner::test::Result;

// Deterministic noise of a few per cent (std::mt19937_64's output is fixed by the standard).
class Noise {
 public:
  explicit Noise(std::uint64_t seed) : rng_(seed) {}
  double factor(double cv) {
    const double u1 = (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53;
    return 1 + cv * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 rng_;
};

struct Commit {
  std::string name;     // the label value
  double step_ms;       // the level of its runs
  std::string torch = "2.14.1";
};

class HistoryCliTest : public ::testing::Test {
 protected:
  HistoryCliTest() : dir_("runner-history-") {}

  // `repeats` runs of each commit in order (each a run of one trial of
  // experiment "bench", labelled commit=NAME), step_time around its level
  // and samples_per_s its inverse.
  void record(const std::vector<Commit>& commits, int repeats, std::uint64_t seed = 1,
              const std::string& experiment = "bench") {
    auto store = runner::store::Store::open(db());
    const auto e = store.upsert_experiment(experiment, "/x/" + experiment + ".toml", experiment);
    const auto trial = store.upsert_trial(e, R"({"model":{"plugin":"mlp"}})", "cfg-" + experiment,
                                          "identity-" + experiment, "");
    Noise noise(seed);
    for (const Commit& c : commits) {
      const auto fingerprint = store.upsert_fingerprint(
          "fp-" + c.torch, json{{"software.torch_version", c.torch}}.dump());
      for (int r = 0; r < repeats; ++r) {
        runner::store::RunStart start;
        start.trial_id = trial;
        start.repeat_index = repeat_++;
        start.labels = {{"commit", c.name}, {"branch", "main"}};
        const auto run = store.begin_run(start);
        store.set_run_fingerprint(run, fingerprint);
        runner::store::Summary s;
        s.metric = "step_time";
        s.unit = "ns";
        s.n = 10;
        s.p50 = s.mean = c.step_ms * 1e6 * noise.factor(0.02);
        store.finish_run(run, runner::store::RunStatus::finished, "", {s},
                         {{"samples_per_s", 64e3 / c.step_ms, "1/s"}});
      }
    }
  }

  static std::vector<Commit> commits(int count, int slower_from, double factor) {
    std::vector<Commit> out;
    for (int i = 0; i < count; ++i)
      out.push_back({"c" + std::to_string(i), i >= slower_from ? 10.0 * factor : 10.0});
    return out;
  }

  Result run(const std::string& args) {
    return runner::test::run_runner(args, dir_.path(), {db(), {}});
  }
  json history_json(const std::string& args, int code = 0) {
    const Result r = run("history " + args + " --format json");
    EXPECT_EQ(r.code, code) << r.err;
    return json::parse(r.out);
  }
  std::filesystem::path db() const { return dir_.path() / "runs.db"; }

  runner::test::TempDir dir_;
  int repeat_ = 0;
};

TEST_F(HistoryCliTest, TheCommitThatSlowedDownIsTheChangePoint) {
  record(commits(12, 8, 1.10), 5);
  const json out = history_json("experiment:bench --along label:commit");
  ASSERT_EQ(out["series"].size(), 1U);
  const json& s = out["series"][0];
  EXPECT_EQ(s["metric"], "step_time");
  ASSERT_EQ(s["points"].size(), 12U);
  EXPECT_EQ(s["points"][0]["at"], "c0");
  EXPECT_EQ(s["points"][0]["runs"].size(), 5U);
  ASSERT_EQ(s["change_points"].size(), 1U) << out.dump(1);
  const json& c = s["change_points"][0];
  EXPECT_EQ(c["at"], "c8");
  EXPECT_NEAR(c["before"].get<double>(), 10e6, 0.2e6);
  EXPECT_NEAR(c["after"].get<double>(), 11e6, 0.25e6);
  EXPECT_NEAR(c["ratio"].get<double>(), 1.10, 0.02);
  EXPECT_GT(c["ci"][0].get<double>(), 1.0);
  EXPECT_LT(c["ci"][0].get<double>(), c["ci"][1].get<double>());
  EXPECT_LT(c["p"].get<double>(), 0.05);
  EXPECT_EQ(c["change"], "slower");
  EXPECT_EQ(out["regression"], false);  // no gate asked for

  const Result table = run("history experiment:bench --along label:commit");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("== bench (trial:1): step_time along label:commit, 12 point(s), 60 run(s)"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("change points:"), std::string::npos);
  EXPECT_NE(table.out.find("<- slower"), std::string::npos);

  const Result csv = run("history experiment:bench --along label:commit --format csv");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("configuration,config_hash,metric,index,at,runs,median,change,", 0), 0U);
  EXPECT_NE(csv.out.find("bench,cfg-bench,step_time,8,c8,5,"), std::string::npos) << csv.out;
}

TEST_F(HistoryCliTest, FailOnRegressionNamesTheConfigurationAndTheCommit) {
  record(commits(10, 9, 1.10), 5);  // the last commit is the slow one: the CI job's case
  Result r = run("history experiment:bench --along label:commit --fail-on regression");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("REGRESSION: bench: step_time 1.", 0), 0U) << r.err;
  EXPECT_NE(r.err.find("x (slower, 95% CI ["), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("from label:commit=c9 on:"), std::string::npos) << r.err;
  // A threshold beyond the step passes, and says so.
  r = run("history experiment:bench --along label:commit --fail-on regression:25");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gate passed: no series ends in a slowdown beyond 25%"), std::string::npos) << r.out;
  // The throughput fell: the same regression read on a higher-is-better metric.
  r = run("history experiment:bench --along label:commit --metric samples_per_s --fail-on regression:3");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const json out = history_json("experiment:bench --along label:commit --fail-on regression", 1);
  EXPECT_EQ(out["regression"], true);
  EXPECT_EQ(out["series"][0]["regression"], true);
}

TEST_F(HistoryCliTest, ASpeedUpOrNoChangePassesTheGate) {
  record(commits(10, 6, 0.90), 5);
  Result r = run("history experiment:bench --along label:commit --fail-on regression");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const json out = history_json("experiment:bench --along label:commit");
  ASSERT_EQ(out["series"][0]["change_points"].size(), 1U);
  EXPECT_EQ(out["series"][0]["change_points"][0]["change"], "faster");

  record(commits(10, 99, 1.0), 5, 2, "flat");
  r = run("history experiment:flat --along label:commit --fail-on regression");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("no change points"), std::string::npos) << r.out;
}

TEST_F(HistoryCliTest, AlongAFingerprintKeyTimeAndAnExplicitOrder) {
  std::vector<Commit> c = commits(8, 4, 1.10);
  for (std::size_t i = 4; i < c.size(); ++i) c[i].torch = "2.15.0";
  record(c, 5);
  json out = history_json("experiment:bench --along software.torch_version");
  ASSERT_EQ(out["series"][0]["points"].size(), 2U);
  ASSERT_EQ(out["series"][0]["change_points"].size(), 1U);
  EXPECT_EQ(out["series"][0]["change_points"][0]["at"], "2.15.0");

  out = history_json("experiment:bench");  // time: each run its own point
  EXPECT_EQ(out["along"], "time");
  ASSERT_EQ(out["series"][0]["points"].size(), 40U);
  ASSERT_EQ(out["series"][0]["change_points"].size(), 1U);
  EXPECT_EQ(out["series"][0]["change_points"][0]["index"], 20);

  // Reversed, the same step is a speed-up at c3; a commit --order names
  // without runs is no point, and commits it leaves out are left out.
  out = history_json(
      "experiment:bench --along label:commit --order c7,c6,c5,c4,cX,c3,c2,c1");
  const json& s = out["series"][0];
  ASSERT_EQ(s["points"].size(), 7U);
  EXPECT_EQ(s["left_out"], 5);
  ASSERT_EQ(s["change_points"].size(), 1U);
  EXPECT_EQ(s["change_points"][0]["at"], "c3");
  EXPECT_EQ(s["change_points"][0]["change"], "faster");
}

TEST_F(HistoryCliTest, BadSelectorsAxesAndMetricsExitTwo) {
  record(commits(4, 99, 1.0), 3);
  const auto error = [&](const std::string& args) {
    const Result r = run("history " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(r.out, "") << args;
    return r.err;
  };
  EXPECT_EQ(error("experiment:nope"),
            "error: no experiment named 'nope' in the database\n"
            "hint: run 'runner runs' to see the recorded experiments\n");
  EXPECT_EQ(error("run:x"), "error: a run id must be a positive integer, found 'x'\n");
  EXPECT_EQ(error("experiment:bench --along label:"),
            "error: --along label: needs a label key, e.g. --along label:commit\n");
  EXPECT_EQ(error("experiment:bench --along label:build"),
            "error: --along label:build: no selected run carries the label 'build'\n"
            "hint: label runs with runner run ... --label build=VALUE\n");
  EXPECT_EQ(error("experiment:bench --along software.nothing"),
            "error: --along software.nothing: no selected run's fingerprint has the key "
            "'software.nothing'\nhint: the axis is time, label:KEY or a fingerprint key such as "
            "software.torch_version (runner show RUN lists a run's fingerprint)\n");
  EXPECT_EQ(error("experiment:bench --metric bogus").rfind(
                "error: --metric: unknown metric 'bogus'\nhint: one of step_time, data, ", 0),
            0U);
  EXPECT_EQ(error("experiment:bench --metric tokens_per_s"),
            "error: --metric: no selected finished run recorded 'tokens_per_s'\n"
            "hint: runner show RUN lists what a run recorded\n");
  EXPECT_EQ(error("experiment:bench --fail-on slowdown"),
            "error: --fail-on must be regression or regression:PCT (PCT a percentage >= 0), "
            "found 'slowdown'\n");
  EXPECT_EQ(error("experiment:bench --fail-on regression:-3"),
            "error: --fail-on must be regression or regression:PCT (PCT a percentage >= 0), "
            "found 'regression:-3'\n");
  EXPECT_EQ(error("experiment:bench --format yaml"),
            "error: --format must be table, json or csv, found 'yaml'\n");
  EXPECT_EQ(error("experiment:bench --order c1,c2"),
            "error: --order orders the values of a label or fingerprint axis, not time\n"
            "hint: e.g. --along label:commit --order abc123,def456\n");
}

// The report's history panel: the commits on the axis, and a rule where
// `runner history` finds the change.
TEST_F(HistoryCliTest, TheReportMarksTheChangePointOnTheCommitAxis) {
  record(commits(12, 8, 1.10), 5);
  const Result r = run("report experiment:bench --out " + (dir_.path() / "r.html").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = runner::test::slurp(dir_.path() / "r.html");
  // Each chart's specification is a <script type="application/json"> element.
  const json* history = nullptr;
  std::vector<json> specs;
  for (std::size_t at = html.find("<script type=\"application/json\""); at != std::string::npos;
       at = html.find("<script type=\"application/json\"", at + 1)) {
    const std::size_t body = html.find('>', at) + 1;
    specs.push_back(json::parse(html.substr(body, html.find("</script>", body) - body)));
  }
  for (const json& spec : specs)
    if (spec.contains("title") && spec["title"].is_string() &&
        spec["title"].get<std::string>().find("of every recorded run") != std::string::npos)
      history = &spec;
  ASSERT_NE(history, nullptr);
  EXPECT_NE((*history)["title"].get<std::string>().find("(dashed: change points)"), std::string::npos);
  const json& layers = (*history)["layer"];
  ASSERT_EQ(layers.size(), 3U);
  const json& x = layers[0]["encoding"]["x"];
  EXPECT_EQ(x["type"], "ordinal");
  EXPECT_EQ(x["title"], "commit (run label), in order of first run");
  ASSERT_EQ(x["sort"].size(), 12U);
  EXPECT_EQ(x["sort"][0], "c0");
  EXPECT_EQ(x["sort"][11], "c11");
  EXPECT_EQ(layers[0]["data"]["values"][0]["x"], "c0");
  EXPECT_EQ(layers[1]["mark"]["type"], "rule");
  ASSERT_EQ(layers[1]["data"]["values"].size(), 1U);
  EXPECT_EQ(layers[1]["data"]["values"][0]["x"], "c8");
  EXPECT_EQ(layers[2]["mark"]["type"], "text");
  EXPECT_EQ(layers[2]["data"]["values"][0]["change"].get<std::string>().substr(5), "x slower");
}

}  // namespace
