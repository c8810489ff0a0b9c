// End to end on a real SLURM: the one-node cluster that the ctest fixture
// slurm_cluster starts (tests/slurm/cluster.sh). `runner submit slurm` sweeps
// there, a cancelled array task is resubmitted, a failing shard is named by
// the merge job, and examples/slurm/runner.sbatch runs two ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;
using runner::test::slurp;
using Clock = std::chrono::steady_clock;

const fs::path kCluster = RUNNER_SLURM_CLUSTER;

// What a shell command printed (stdout and stderr).
std::string shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  return out;
}

class SlurmClusterTest : public runner::test::CliTestBase {
 protected:
  SlurmClusterTest() : CliTestBase("runner-slurm-") {}

  void SetUp() override {
    if (fs::exists(kCluster / "skipped"))
      GTEST_SKIP() << "no SLURM cluster: " << slurp(kCluster / "skipped");
    if (!fs::exists(kCluster / "slurm.conf"))
      GTEST_SKIP() << "no SLURM cluster in " << kCluster.string()
                   << " (ctest starts it: the fixture slurm_cluster, tests/slurm/cluster.sh)";
    ::setenv("SLURM_CONF", (kCluster / "slurm.conf").c_str(), 1);
  }

  Result runner(const std::string& args, const fs::path& plugins = {}) const {
    return runner::test::run_runner(args, dir_, {db_, plugins});
  }

  // The job ids `runner submit slurm` printed: array, merge.
  static std::pair<std::string, std::string> job_ids(const std::string& out) {
    std::smatch m;
    if (!std::regex_search(out, m, std::regex("submitted array job ([0-9]+) .* merge job ([0-9]+)")))
      return {};
    return {m[1], m[2]};
  }

  // Waits (bounded) until neither job is pending or running; false on timeout.
  static bool wait_for(const std::pair<std::string, std::string>& jobs, int seconds = 150) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      if (shell("squeue -h -o %i -j " + jobs.first + "," + jobs.second).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return false;
  }

  // "JobState=... ExitCode=..." of a job SLURM still remembers (MinJobAge).
  static std::string job_end(const std::string& id) {
    const std::string text = shell("scontrol show job -o " + id);
    std::smatch state, code;
    std::regex_search(text, state, std::regex("JobState=([A-Z_]+)"));
    std::regex_search(text, code, std::regex("ExitCode=([0-9:]+)"));
    return std::string(state[1]) + " " + std::string(code[1]);
  }

  std::int64_t count(const std::string& sql) const { return runner::test::query_int(db_, sql); }

  // Every (trial, repetition) with exactly one finished run, and no more.
  void expect_every_run_once(std::int64_t planned) const {
    EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status = 'finished'"), planned);
    EXPECT_EQ(count("SELECT count(*) FROM (SELECT DISTINCT trial_id, repeat_index FROM runs "
                    "WHERE status = 'finished')"),
              planned);
  }

  fs::path shards() const { return fs::path(db_).replace_extension(".shards"); }

  // 12 runs of the built-in plugins (3 trials x 4 repetitions), `steps` each.
  fs::path sweep(int steps) const {
    return write("sweep.toml",
                 "[experiment]\nname = \"sweep\"\nrepeats = 4\n[device]\ntype = \"cpu\"\n"
                 "threads = 1\n[model]\nplugin = \"mlp\"\nhidden = [8]\n"
                 "[data]\nplugin = \"synthetic\"\nshape = [4]\nclasses = 2\nsize = 64\n"
                 "batch_size = 8\n[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n[train]\nsteps = " +
                     std::to_string(steps) + "\nwarmup = 0\n"
                     "[sweep]\n\"optimizer.lr\" = [0.1, 0.05, 0.01]\n");
  }
};

TEST_F(SlurmClusterTest, ASweepOfTwelveRunsInFourShardsIsMergedWithEveryRunOnce) {
  const Result r = runner("submit slurm " + sweep(3).string() + " --shards 4");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto jobs = job_ids(r.out);
  ASSERT_FALSE(jobs.first.empty()) << r.out;
  ASSERT_TRUE(wait_for(jobs)) << shell("squeue");
  const std::string report = slurp(shards() / "merge.out");
  EXPECT_NE(report.find("all 4 shards finished; merged into " + db_.string()), std::string::npos)
      << report;
  EXPECT_EQ(job_end(jobs.second), "COMPLETED 0:0") << report;
  expect_every_run_once(12);
  EXPECT_EQ(count("SELECT count(*) FROM runs"), 12);
  for (int k = 1; k <= 4; ++k)
    EXPECT_EQ(slurp(shards() / ("shard-" + std::to_string(k) + ".status")), "0\n") << k;
}

TEST_F(SlurmClusterTest, ACancelledArrayTaskIsNamedAndAResubmissionRunsOnlyWhatItLacks) {
  const fs::path file = sweep(20000);
  const std::string submit = "submit slurm " + file.string() + " --shards 4";
  const Result r = runner(submit);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto jobs = job_ids(r.out);
  ASSERT_FALSE(jobs.first.empty()) << r.out;
  // The first shard seen running a run is cancelled mid-run.
  int cancelled = 0;
  runner::test::wait_until(Clock::now() + std::chrono::seconds(90), [&] {
    for (int k = 1; k <= 4 && cancelled == 0; ++k)
      if (runner::test::query_int(shards() / ("shard-" + std::to_string(k) + ".db"),
                                  "SELECT count(*) FROM runs WHERE status = 'running'",
                                  runner::test::OnDbError::ignore) > 0)
        cancelled = k;
    return cancelled != 0;
  });
  ASSERT_NE(cancelled, 0) << shell("squeue");
  const std::string task = jobs.first + "_" + std::to_string(cancelled);
  EXPECT_EQ(shell("scancel " + task), "");
  ASSERT_TRUE(wait_for(jobs)) << shell("squeue");
  const std::string report = slurp(shards() / "merge.out");
  const std::string k = std::to_string(cancelled);
  EXPECT_NE(report.find("shard " + k + "/4 did not finish: no exit status (cancelled, out of "
                        "time or its node was lost); log: " + shards().string() + "/shard-" + k +
                        ".out"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("failed shards: " + k + " (1 of 4)"), std::string::npos) << report;
  EXPECT_EQ(job_end(jobs.second), "FAILED 1:0") << report;
  EXPECT_LT(count("SELECT count(*) FROM runs WHERE status = 'finished'"), 12);

  const Result again = runner(submit);
  ASSERT_EQ(again.code, 0) << again.err << again.out;
  const auto jobs2 = job_ids(again.out);
  ASSERT_TRUE(wait_for(jobs2)) << shell("squeue");
  const std::string report2 = slurp(shards() / "merge.out");
  EXPECT_NE(report2.find("all 4 shards finished"), std::string::npos) << report2;
  expect_every_run_once(12);
  // The cancelled run stays on record as interrupted; nothing else but the 12.
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status != 'finished'"),
            count("SELECT count(*) FROM runs WHERE status = 'interrupted'"));
  EXPECT_LE(count("SELECT count(*) FROM runs WHERE status = 'interrupted'"), 1);
  // Only the cancelled shard ran again: the others' logs say nothing was left.
  for (int s = 1; s <= 4; ++s) {
    if (s == cancelled) continue;
    EXPECT_NE(slurp(shards() / ("shard-" + std::to_string(s) + ".out")).find(" 0 run(s) now"),
              std::string::npos)
        << s;
  }
}

TEST_F(SlurmClusterTest, TheMergeJobNamesTheShardsWhoseRunsFailed) {
  const fs::path file = write(
      "fails.toml", runner::test::tiny_experiment(
                        {.steps = 4, .rest = "[experiment]\nname = \"fails\"\nrepeats = 2\n"
                                             "[sweep]\n\"model.throw_at_step\" = [-1, 2]\n"}));
  const Result r = runner("submit slurm " + file.string() + " --shards 2",
                          runner::test::test_plugins("good"));
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const auto jobs = job_ids(r.out);
  ASSERT_TRUE(wait_for(jobs)) << shell("squeue");
  const std::string report = slurp(shards() / "merge.out");
  std::string failed;
  for (int k = 1; k <= 2; ++k) {
    const std::string s = std::to_string(k);
    const bool fails = runner::test::query_int(shards() / ("shard-" + s + ".db"),
                                               "SELECT count(*) FROM runs WHERE status = "
                                               "'failed'") > 0;
    const std::string line = "shard " + s + "/2 failed: runner run exited with status 1 (1: a run "
                             "failed, 2: bad input, 130: interrupted); log: " +
                             shards().string() + "/shard-" + s + ".out";
    EXPECT_EQ(report.find(line) != std::string::npos, fails) << report;
    if (fails) failed += (failed.empty() ? "" : " ") + s;
  }
  ASSERT_FALSE(failed.empty());
  EXPECT_NE(report.find("failed shards: " + failed + " ("), std::string::npos) << report;
  EXPECT_EQ(job_end(jobs.second), "FAILED 1:0") << report;
  // What the shards recorded is merged, the failed runs too.
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status = 'failed'"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status = 'finished'"), 2);
}

TEST_F(SlurmClusterTest, TheDataParallelSbatchExampleRunsTwoRanksAndRecordsOneRun) {
  const fs::path file = write(
      "dp.toml", "[experiment]\nname = \"dp\"\n[device]\ntype = \"cpu\"\nthreads = 1\n"
                 "[model]\nplugin = \"mlp\"\nhidden = [8]\n[data]\nplugin = \"synthetic\"\n"
                 "shape = [4]\nclasses = 2\nsize = 64\nbatch_size = 4\n"
                 "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n[train]\nsteps = 5\nwarmup = 0\n"
                 "[distributed]\nworld_size = 2\n");
  const fs::path example = fs::path(RUNNER_SOURCE_DIR) / "examples/slurm/runner.sbatch";
  const fs::path out = dir_ / "dp.out";
  // One node of two ranks instead of the example's 2 x 4; runner from this build on PATH.
  const std::string bin = runner::test::runner_executable().parent_path().string();
  std::string id = shell(
      "PATH='" + bin + "':\"$PATH\" sbatch --parsable --nodes=1 --ntasks-per-node=2 "
      "--cpus-per-task=1 --output='" + out.string() + "' '" + example.string() + "' '" +
      file.string() + "' --db '" + db_.string() + "'");
  if (!id.empty() && id.back() == '\n') id.pop_back();
  ASSERT_TRUE(std::regex_match(id, std::regex("[0-9]+"))) << id;
  ASSERT_TRUE(wait_for({id, id})) << shell("squeue");
  EXPECT_EQ(job_end(id), "COMPLETED 0:0") << slurp(out);
  EXPECT_EQ(count("SELECT count(*) FROM runs"), 1) << slurp(out);
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
  // Both ranks took the steps: rank 0 gathered the step times of two.
  EXPECT_EQ(count("SELECT value FROM metrics WHERE name = 'ranks_reporting_times'"), 2);
  EXPECT_NE(slurp(out).find("rank 0 of 2: serving the job's rendezvous"), std::string::npos)
      << slurp(out);
}

}  // namespace
