// End to end without SLURM: `runner submit slurm`'s checks (exact messages),
// the scripts --dry-run prints, and the submission through a stand-in sbatch
// that records its arguments. The real cluster is slurm_cluster_test.cpp's.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;
using runner::test::slurp;

// Sets an environment variable for one test and puts it back after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

constexpr const char* kUsageHint =
    "hint: usage: runner submit slurm FILE... --shards N [--sbatch \"ARGS\"] [--db OUT.db] "
    "[options]\n";

class SubmitCliTest : public runner::test::CliTestBase {
 protected:
  SubmitCliTest() : CliTestBase("runner-submit-cli-") {}

  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, {}});
  }

  // 12 runs of the built-in plugins: 3 trials x 4 repetitions.
  fs::path sweep(int world_size = 1) const {
    std::string text =
        "[experiment]\nname = \"sweep\"\nrepeats = 4\n[device]\ntype = \"cpu\"\nthreads = 1\n"
        "[model]\nplugin = \"mlp\"\nhidden = [8]\n"
        "[data]\nplugin = \"synthetic\"\nshape = [4]\nclasses = 2\nsize = 64\nbatch_size = 8\n"
        "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n[train]\nsteps = 3\nwarmup = 0\n"
        "[sweep]\n\"optimizer.lr\" = [0.1, 0.05, 0.01]\n";
    if (world_size > 1) text += "[distributed]\nworld_size = " + std::to_string(world_size) + "\n";
    return write("sweep.toml", text);
  }

  // A folder with a stand-in sbatch: it appends its arguments to sbatch.log
  // and prints job ids 41, 42, ... as `sbatch --parsable` does.
  fs::path fake_sbatch(const std::string& fail = "") const {
    const fs::path bin = dir_ / "bin";
    fs::create_directories(bin);
    const fs::path log = dir_ / "sbatch.log";
    runner::test::write_file(
        bin / "sbatch",
        "#!/bin/sh\necho \"$*\" >> '" + log.string() + "'\n" + fail +
            "n=$(wc -l < '" + log.string() + "')\necho $((40 + n))\n");
    ::chmod((bin / "sbatch").c_str(), 0755);
    return bin;
  }
};

TEST_F(SubmitCliTest, WithoutShardsIsAUsageError) {
  const Result r = runner("submit slurm " + sweep().string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, std::string("error: runner submit slurm: missing --shards N\n") + kUsageHint);
}

TEST_F(SubmitCliTest, ShardsMustBeAPositiveInteger) {
  for (const std::string bad : {"0", "-2", "four"}) {
    const Result r = runner("submit slurm " + sweep().string() + " --shards " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(r.err, "error: --shards must be a positive integer, found '" + bad + "'\n") << bad;
  }
}

TEST_F(SubmitCliTest, AnUnknownOptionIsNamedWithTheClosestOne) {
  const Result r = runner("submit slurm " + sweep().string() + " --shard 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "error: runner submit slurm: unknown option '--shard'; did you mean '--shards'?\n"
            "hint: run 'runner submit slurm --help' for usage\n");
}

TEST_F(SubmitCliTest, AnUnknownSchedulerIsRefused) {
  const Result r = runner("submit pbs " + sweep().string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, std::string("error: unknown scheduler 'pbs'; runner submits to 'slurm'\n") +
                       kUsageHint);
}

TEST_F(SubmitCliTest, WithoutSbatchOnThePathItSaysSoAndSubmitsNothing) {
  // Only env, which the harness runs runner through.
  const fs::path empty = dir_ / "no-sbatch";
  fs::create_directories(empty);
  fs::create_symlink("/usr/bin/env", empty / "env");
  const fs::path file = sweep();
  const ScopedEnv path("PATH", empty.string());
  const Result r = runner("submit slurm " + file.string() + " --shards 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: sbatch not found on PATH: " + empty.string() +
                       "\nhint: run on a machine with SLURM's client commands (a login node), "
                       "or print the scripts with --dry-run\n");
  EXPECT_FALSE(fs::exists(fs::path(db_).replace_extension(".shards")));
}

TEST_F(SubmitCliTest, SbatchOptionsThatRunnerSetsAreRefused) {
  const Result r =
      runner("submit slurm " + sweep().string() + " --shards 2 --sbatch '--time=5 --array=1-3'");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "error: --sbatch may not set --array: runner submit sets it itself\n"
            "hint: leave --array out; the scripts and logs are in the shards folder\n");
  const Result quote = runner("submit slurm " + sweep().string() + " --shards 2 --sbatch '\"x'");
  EXPECT_EQ(quote.code, 2);
  EXPECT_EQ(quote.err,
            "error: --sbatch has an unclosed \" quote: \"x\n"
            "hint: close the quote, e.g. --sbatch \"--partition=gpu --time=01:00:00\"\n");
}

TEST_F(SubmitCliTest, DryRunPrintsBothScriptsWithAbsolutePathsAndWritesNothing) {
  const fs::path file = sweep();
  const Result r = runner("submit slurm " + file.string() + " --shards 4 --dry-run --sbatch " +
                          "'--partition=debug --time=10'");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string folder = (fs::path(db_).replace_extension(".shards")).string();
  const std::string exe = runner::test::runner_executable().lexically_normal().string();
  EXPECT_NE(r.out.find("12 run(s) in 4 shard(s) of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#SBATCH --array=1-4\n#SBATCH --ntasks=1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#SBATCH --output=\"" + folder + "/shard-%a.out\"\n"), std::string::npos);
  EXPECT_NE(r.out.find("'" + exe + "' run '" + file.string() + "' --shard \"$shard/4\" --db '" +
                       folder + "/shard-'\"$shard\".db\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("'" + exe + "' merge \"${databases[@]}\" --into \"$into\""),
            std::string::npos);
  EXPECT_NE(r.out.find("into='" + db_.string() + "'\n"), std::string::npos);
  EXPECT_NE(r.out.find("sbatch --parsable '--partition=debug' '--time=10' '" + folder +
                       "/array.sbatch'\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--dependency=afterany:ARRAY_JOB_ID '" + folder + "/merge.sbatch'\n"),
            std::string::npos);
  EXPECT_NE(r.out.find("nothing was written or submitted (--dry-run)\n"), std::string::npos);
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(SubmitCliTest, AWorldSizeOfTwoGivesEveryShardTwoTasksStartedBySrun) {
  const Result r = runner("submit slurm " + sweep(2).string() + " --shards 3 --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("; 2 ranks per task\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#SBATCH --ntasks=2\n"), std::string::npos);
  EXPECT_NE(r.out.find("srun --kill-on-bad-exit=1"), std::string::npos);
  EXPECT_NE(r.out.find("export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
                       "LOCAL_RANK=$SLURM_LOCALID"),
            std::string::npos);
}

TEST_F(SubmitCliTest, SubmitsTheArrayThenTheMergeJobAfterIt) {
  const fs::path file = sweep();
  const ScopedEnv path("PATH", fake_sbatch().string() + ":/usr/bin:/bin");
  const Result r = runner("submit slurm " + file.string() + " --shards 4 --sbatch --time=10");
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path folder = fs::path(db_).replace_extension(".shards");
  EXPECT_EQ(slurp(dir_ / "sbatch.log"),
            "--parsable --time=10 " + (folder / "array.sbatch").string() + "\n" +
                "--parsable --time=10 --dependency=afterany:41 " +
                (folder / "merge.sbatch").string() + "\n");
  EXPECT_NE(r.out.find("submitted array job 41 (4 tasks, one per shard) and merge job 42 "
                       "(after the array)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("follow:  squeue -j 41,42"), std::string::npos);
  EXPECT_NE(slurp(folder / "array.sbatch").find("#SBATCH --array=1-4\n"), std::string::npos);
  EXPECT_NE(slurp(folder / "merge.sbatch").find("n=4\n"), std::string::npos);

  // The same folder with another number of shards would mix two slicings.
  const Result other = runner("submit slurm " + file.string() + " --shards 3");
  EXPECT_EQ(other.code, 2);
  EXPECT_EQ(other.err, "error: " + folder.string() +
                           " holds the shards of a --shards 4 submission, not 3\n"
                           "hint: resubmit with --shards 4, or give another --db\n");
}

TEST_F(SubmitCliTest, ARefusedMergeJobNamesTheArrayLeftWithoutIt) {
  const fs::path file = sweep();
  const ScopedEnv path(
      "PATH",
      fake_sbatch("case \"$*\" in *dependency*) echo 'sbatch: error: QOSMaxJobs' >&2; exit 1;; esac\n")
              .string() + ":/usr/bin:/bin");
  const Result r = runner("submit slurm " + file.string() + " --shards 2");
  EXPECT_EQ(r.code, 1);
  const std::string folder = (fs::path(db_).replace_extension(".shards")).string();
  EXPECT_EQ(r.err, "error: sbatch " + folder + "/merge.sbatch failed (exit status 1): sbatch: "
                   "error: QOSMaxJobs; the array job 41 is submitted without its merge job\n"
                   "hint: cancel it (scancel 41) and submit again, or merge its shards yourself "
                   "when it ends (runner merge " + folder + "/shard-*.db --into " +
                   db_.string() + ")\n");
}

}  // namespace
