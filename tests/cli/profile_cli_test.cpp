// End to end: [profile] steps on the built-in MLP. A profiled run leaves a
// Chrome trace (the path in run_files) with the model's operators, a run_ops
// table, and profiled samples left out of the statistics; `runner show
// --ops` prints the operators; profiling off leaves nothing; a trace folder
// that cannot be made is refused before anything is written; merge carries
// the operators and the trace's row.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "runner/store/store.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::Result;

const std::string kTrain = R"([experiment]
name = "profiled"

[device]
type = "cpu"
threads = 1

[model]
plugin = "mlp"
hidden = [16, 16]

[data]
plugin = "synthetic"
shape = [8]
classes = 3
size = 256
batch_size = 16

[optimizer]
plugin = "sgd"
lr = 0.1

[train]
steps = 8
warmup = 2
)";

const std::string kProfile = "\n[profile]\nsteps = 3\n";

class ProfileCliTest : public runner::test::CliTestBase {
 protected:
  ProfileCliTest() : CliTestBase("runner-profile-cli-") {}

  Result runner(const std::string& args, const fs::path& db = {}) const {
    runner::test::RunnerPaths paths;
    paths.db = db.empty() ? db_ : db;
    return runner::test::run_runner(args, dir_, paths);
  }
  std::int64_t query(const std::string& sql, const fs::path& db = {}) const {
    return runner::test::query_int(db.empty() ? db_ : db, sql);
  }
  std::string text(const std::string& sql, const fs::path& db = {}) const {
    return runner::test::query_text(db.empty() ? db_ : db, sql);
  }
  fs::path traces() const { return dir_ / "runs.db.traces"; }
};

TEST_F(ProfileCliTest, AProfiledTrainingRunHasATraceAnOperatorTableAndCleanStatistics) {
  const fs::path file = write("train.toml", kTrain + kProfile);
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  // Kineto's own log lines stay out of runner's output.
  EXPECT_EQ(r.err.find("profiler_start"), std::string::npos) << r.err;

  // The trace: at the path the run's row names, next to the database, JSON
  // with the model's operators forward (addmm) and backward (mm).
  const std::string path = text("SELECT path FROM run_files WHERE role = 'profile_trace'");
  const std::string uuid = text("SELECT uuid FROM runs");
  EXPECT_EQ(fs::path(path), traces() / ("run-" + uuid + ".json"));
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(query("SELECT bytes FROM run_files WHERE role = 'profile_trace'"),
            static_cast<std::int64_t>(fs::file_size(path)));
  const nlohmann::json trace = nlohmann::json::parse(runner::test::slurp(path));
  ASSERT_TRUE(trace.contains("traceEvents"));
  std::set<std::string> names;
  int steps = 0;
  for (const auto& event : trace.at("traceEvents"))
    if (event.contains("name") && event.at("name").is_string()) {
      names.insert(event.at("name").get<std::string>());
      steps += event.at("name") == "runner::step" ? 1 : 0;
    }
  for (const char* op : {"aten::addmm", "aten::mm", "aten::relu", "runner::step"})
    EXPECT_EQ(names.count(op), 1u) << op;
  EXPECT_EQ(steps, 3);
  // Only the temporary file's final name is left.
  EXPECT_EQ(std::distance(fs::directory_iterator(traces()), fs::directory_iterator()), 1);

  // The operators: three linear layers, three profiled steps.
  EXPECT_EQ(query("SELECT calls FROM run_ops WHERE name = 'aten::addmm'"), 9);
  EXPECT_EQ(query("SELECT calls FROM run_ops WHERE name = 'runner::step'"), 3);
  EXPECT_GT(query("SELECT count(*) FROM run_ops"), 10);
  EXPECT_EQ(query("SELECT count(*) FROM run_ops WHERE calls < 1 OR self_cpu_ns > total_cpu_ns "
                  "OR total_cpu_ns < 0 OR self_cuda_ns <> 0 OR input_shapes <> ''"),
            0);
  EXPECT_GT(query("SELECT total_cpu_ns FROM run_ops WHERE name = 'runner::step'"),
            query("SELECT self_cpu_ns FROM run_ops WHERE name = 'runner::step'"));

  // The samples: 2 warm-up, 3 profiled right after them, 8 measured; the
  // statistics count the measured ones only.
  EXPECT_EQ(query("SELECT count(*) FROM samples"), 13);
  EXPECT_EQ(text("SELECT group_concat(step) FROM (SELECT step FROM samples WHERE profiled = 1 "
                 "ORDER BY step)"),
            "2,3,4");
  EXPECT_EQ(query("SELECT count(*) FROM samples WHERE profiled = 1 AND warmup = 1"), 0);
  EXPECT_EQ(query("SELECT n FROM summaries WHERE metric = 'step_time'"), 8);
  EXPECT_EQ(query("SELECT max(n) FROM summaries"), 8);
  EXPECT_EQ(query("SELECT value FROM metrics WHERE name = 'profiled_steps'"), 3);
  EXPECT_EQ(query("SELECT value FROM metrics WHERE name = 'measured_steps'"), 8);
  EXPECT_EQ(query("SELECT value FROM metrics WHERE name = 'warmup_steps'"), 2);

  const Result ops = runner("show 1 --ops --top 4");
  ASSERT_EQ(ops.code, 0) << ops.err;
  EXPECT_EQ(ops.out.rfind("run 1  profiled  (train): 3 profiled step(s); top 4 of ", 0), 0u)
      << ops.out;
  EXPECT_NE(ops.out.find("\nop "), std::string::npos);
  EXPECT_NE(ops.out.find("calls  self CPU  total CPU  self CUDA  total CUDA\n"), std::string::npos)
      << ops.out;
  EXPECT_EQ(ops.out.find("input shapes"), std::string::npos);
  EXPECT_NE(ops.out.find("trace: " + path + " ("), std::string::npos) << ops.out;
  EXPECT_NE(ops.out.find("\n  open it in https://ui.perfetto.dev or chrome://tracing\n"),
            std::string::npos);
  // Header, 4 operators, then the 3 lines of notes: no more rows than asked for.
  const auto table = ops.out.substr(ops.out.find("\nop ") + 1);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 1 + 4 + 3) << ops.out;

  const Result show = runner("show 1");
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("note: 3 profiled step(s) excluded from the statistics; trace " + path +
                          " ('runner show 1 --ops' for the operators)\n"),
            std::string::npos)
      << show.out;
}

TEST_F(ProfileCliTest, AnInferenceRunRecordsShapesWhenAsked) {
  const fs::path file = write("infer.toml", R"([experiment]
name = "infer-profiled"
kind = "infer"

[device]
type = "cpu"
threads = 1

[model]
plugin = "mlp"
hidden = [16]

[data]
plugin = "synthetic"
shape = [8]
classes = 3
size = 256
batch_size = 4

[infer]
batches = 5
warmup = 1

[profile]
steps = 2
record_shapes = true
)");
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query("SELECT count(*) FROM samples WHERE profiled = 1"), 2);
  EXPECT_EQ(query("SELECT n FROM summaries WHERE metric = 'latency'"), 5);
  // Forward only: two linear layers per batch, inputs [4, 8] then [4, 16].
  EXPECT_EQ(query("SELECT count(*) FROM run_ops WHERE name = 'aten::mm'"), 0);
  EXPECT_EQ(query("SELECT sum(calls) FROM run_ops WHERE name = 'aten::addmm'"), 4);
  EXPECT_EQ(query("SELECT calls FROM run_ops WHERE name = 'aten::addmm' AND input_shapes = "
                  "'[[16], [4, 8], [8, 16], [], []]'"),
            2)
      << text("SELECT group_concat(input_shapes, ' | ') FROM run_ops WHERE name = 'aten::addmm'");
  const Result ops = runner("show 1 --ops");
  ASSERT_EQ(ops.code, 0) << ops.err;
  EXPECT_NE(ops.out.find("input shapes"), std::string::npos);
  EXPECT_NE(ops.out.find("[[16], [4, 8], [8, 16], [], []]"), std::string::npos) << ops.out;
}

TEST_F(ProfileCliTest, ProfilingOffLeavesNoTraceNoOperatorsNoProfiledSamples) {
  const fs::path file = write("train.toml", kTrain);
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  EXPECT_FALSE(fs::exists(traces()));
  EXPECT_EQ(query("SELECT count(*) FROM run_ops"), 0);
  EXPECT_EQ(query("SELECT count(*) FROM run_files"), 0);
  EXPECT_EQ(query("SELECT count(*) FROM samples WHERE profiled <> 0"), 0);
  EXPECT_EQ(query("SELECT count(*) FROM metrics WHERE name = 'profiled_steps'"), 0);
  const Result ops = runner("show 1 --ops");
  EXPECT_EQ(ops.code, 2);
  EXPECT_EQ(ops.out, "");
  EXPECT_EQ(ops.err,
            "error: run 1 was not profiled; add [profile] steps = 5 to its experiment (or run it "
            "with --set profile.steps=5) to record its operators\n"
            "hint: docs/profiling.md explains what is recorded\n");
  EXPECT_EQ(runner("show 1").out.find("profiled step"), std::string::npos);
  const Result top = runner("show 1 --top 3");
  EXPECT_EQ(top.code, 2);
  EXPECT_EQ(top.err, "error: --top applies to --ops\nhint: run 'runner show 1 --ops --top N'\n");
}

TEST_F(ProfileCliTest, ATraceFolderThatCannotBeMadeIsRefusedBeforeAnythingIsWritten) {
  runner::test::write_file(traces(), "a file where the folder should be\n");
  const fs::path file = write("train.toml", kTrain + kProfile);
  const Result r = runner("run " + file.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_EQ(r.err.substr(r.err.find("error:")),
            "error: cannot write profiler traces to '" + traces().string() +
                "': Not a directory\n"
                "hint: [profile] steps writes one trace per run next to the database; choose a "
                "database in a writable folder with --db PATH, or remove [profile]\n");
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(ProfileCliTest, BadValuesAreRefusedAtTheirPlace) {
  expect_refused(write("bad.toml", kTrain + "\n[profile]\nsteps = 5000\n"), "steps = 5000",
                 "'profile.steps' must be between 0 and 1000, found 5000");
  const Result set = runner("run " + write("ok.toml", kTrain).string() + " --set profile.steps=-2");
  EXPECT_EQ(set.code, 2);
  EXPECT_NE(set.err.find("error: --set profile.steps=-2: 'profile.steps' must be between 0 and "
                         "1000, found -2\n"),
            std::string::npos)
      << set.err;
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(ProfileCliTest, MergeCarriesTheOperatorsAndTheTraceRow) {
  const fs::path file = write("train.toml", kTrain + kProfile);
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  const fs::path all = dir_ / "all.db";
  const Result merged = runner("merge " + db_.string() + " --into " + all.string(), all);
  ASSERT_EQ(merged.code, 0) << merged.err;
  const std::int64_t ops = query("SELECT count(*) FROM run_ops");
  const std::size_t row = merged.out.find("\nrun_ops ");
  ASSERT_NE(row, std::string::npos) << merged.out;
  const std::string line = merged.out.substr(row + 1, merged.out.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find(" " + std::to_string(ops) + " "), std::string::npos) << line;
  EXPECT_EQ(line.back(), '0') << line;  // nothing already present
  EXPECT_EQ(query("SELECT count(*) FROM run_ops", all), ops);
  EXPECT_EQ(query("SELECT sum(calls) FROM run_ops", all), query("SELECT sum(calls) FROM run_ops"));
  EXPECT_EQ(text("SELECT path || sha256 FROM run_files WHERE role = 'profile_trace'", all),
            text("SELECT path || sha256 FROM run_files WHERE role = 'profile_trace'"));
  EXPECT_EQ(query("SELECT count(*) FROM samples WHERE profiled = 1", all), 3);
  const Result show = runner("show 1 --ops", all);
  EXPECT_EQ(show.code, 0) << show.err;
}

}  // namespace
