// The environment as an experiment variable, end to end: [env] and [runtime]
// runs in a fresh (exec'd) run process whose settings are read back and
// recorded; a changed environment makes new runs and --dry-run says what
// changed; several files run as one interleaved schedule; runner compare
// flags sides that ran in separate blocks of time.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runner/runtime/runtime.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::query_int;
using runner::test::query_text;
using runner::test::run_runner;

const fs::path kGood = runner::test::test_plugins("good");

class EnvironmentCliTest : public runner::test::CliTestBase {
 protected:
  EnvironmentCliTest() : CliTestBase("runner-env-") {}

  // A tiny experiment named `name` with `rest` appended.
  fs::path experiment(const std::string& name, const std::string& rest, int repeats = 1) {
    return write(name + ".toml",
                 runner::test::tiny_experiment(
                     {.steps = 5,
                      .rest = "[experiment]\nname = \"" + name + "\"\nrepeats = " +
                              std::to_string(repeats) + "\n" + rest}));
  }
  runner::test::Result runner(const std::string& args) {
    return run_runner(args, dir_, {db_, kGood});
  }
  // A fingerprint field of run `id`.
  std::string field(int id, const std::string& key) {
    return query_text(db_, "SELECT json_extract(f.json, '$.\"" + key +
                               "\"') FROM runs r JOIN fingerprints f ON f.id = r.fingerprint_id "
                               "WHERE r.id = " + std::to_string(id));
  }
};

// Sets an environment variable of this process (and so of the runner it
// starts) for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST_F(EnvironmentCliTest, AFreshProcessGetsTheEnvironmentAndProvesIt) {
  if (!runner::allocator_preload_possible())
    GTEST_SKIP() << "an AddressSanitizer build cannot preload an allocator (tested in "
                    "EnvironmentKeysTest.InstalledAllocatorsAreAccepted)";
  const std::vector<int> cpus = runner::allowed_cpus();
  const std::string cpu = std::to_string(cpus.back());
  const fs::path file = experiment(
      "fresh", "[env]\nOMP_NUM_THREADS = \"1\"\nTEST_FREE_VAR = \"x y\"\n"
               "[runtime]\nallocator = \"jemalloc\"\ncpu_affinity = \"" + cpu + "\"\n");
  const auto r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query_text(db_, "SELECT status FROM runs WHERE id = 1"), "finished");
  // Read back in the run process and recorded with the run.
  EXPECT_EQ(field(1, "env.OMP_NUM_THREADS"), "1");
  EXPECT_EQ(field(1, "env.TEST_FREE_VAR"), "x y");
  EXPECT_EQ(field(1, "threads.intra_op"), "1");
  EXPECT_EQ(field(1, "runtime.malloc"), runner::find_allocator_library("jemalloc")->string());
  EXPECT_EQ(field(1, "runtime.cpus"), cpu);
  // The runner itself was not bound: a second, plain run is on every CPU.
  const fs::path plain = experiment("plain", "");
  ASSERT_EQ(runner("run " + plain.string()).code, 0);
  EXPECT_EQ(field(2, "runtime.cpus"), runner::format_cpu_list(cpus));
  EXPECT_NE(field(2, "runtime.malloc"), field(1, "runtime.malloc"));
  EXPECT_EQ(field(2, "env.TEST_FREE_VAR"), "");
}

TEST_F(EnvironmentCliTest, ASweptVariableRunsEachValueInItsOwnProcess) {
  const fs::path file = experiment(
      "swept", "[sweep]\n\"env.OMP_NUM_THREADS\" = [\"1\", \"2\"]\n[device]\ntype = \"cpu\"\n");
  const auto r = runner("run " + file.string() + " --dry-run");
  EXPECT_NE(r.out.find("run [fresh process]"), std::string::npos) << r.out;
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  EXPECT_EQ(field(1, "threads.intra_op"), "1");
  EXPECT_EQ(field(2, "threads.intra_op"), "2");
  EXPECT_EQ(query_int(db_, "SELECT count(DISTINCT identity) FROM trials"), 2);
}

TEST_F(EnvironmentCliTest, AChangedEnvironmentMakesNewRunsAndSaysWhatChanged) {
  const fs::path file = experiment("changed", "");
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  auto r = runner("run " + file.string());
  EXPECT_NE(r.err.find("0 to run, 1 already done"), std::string::npos) << r.err;
  {
    // A performance variable (OMP_*) that no shell sets: runner's own
    // environment changes, so the trial is another one.
    const ScopedEnv flag("OMP_RUNNER_TEST_FLAG", "1");
    r = runner("run " + file.string() + " --dry-run");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("run (changed since the recorded runs)"), std::string::npos) << r.out;
    // Not recorded under this environment yet: the file's first trial, new (issue 36 item 4).
    EXPECT_NE(r.out.find("trial #1 (new): runs of the same configuration are recorded under another "
                         "environment; changed since:\n  env.OMP_RUNNER_TEST_FLAG: (unset) -> 1\n"),
              std::string::npos)
        << r.out;
    r = runner("run " + file.string());
    EXPECT_NE(r.err.find("1 to run, 0 already done"), std::string::npos) << r.err;
  }
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 2);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM trials"), 2);
  EXPECT_NE(query_text(db_, "SELECT environment FROM trials WHERE id = 2")
                .find("\"env.OMP_RUNNER_TEST_FLAG\":\"1\""),
            std::string::npos);
}

TEST_F(EnvironmentCliTest, SeveralFilesRunAsOneInterleavedSchedule) {
  const fs::path a = experiment("side_a", "", 2), b = experiment("side_b", "", 2);
  // Same configuration on both sides (an A/A pair): --force runs both.
  const auto r = runner("run " + a.string() + " " + b.string() + " --force");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("experiments 'side_a', 'side_b' (train): 2 trial(s) x 2 repetition(s)"),
            std::string::npos)
      << r.err;
  std::string order;
  for (int id = 1; id <= 4; ++id)
    order += query_text(db_, "SELECT e.name FROM runs r JOIN trials t ON t.id = r.trial_id JOIN "
                             "experiments e ON e.id = t.experiment_id WHERE r.id = " +
                                 std::to_string(id)) + " ";
  EXPECT_EQ(order, "side_a side_b side_a side_b ");
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM experiments"), 2);
  // Compared across files: interleaved, so no warning about blocks.
  const auto c = runner("compare experiment:side_a experiment:side_b");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out.find("separate blocks"), std::string::npos) << c.out;
}

TEST_F(EnvironmentCliTest, CompareFlagsSidesThatRanInSeparateBlocks) {
  const fs::path a = experiment("block_a", "", 3), b = experiment("block_b", "", 3);
  ASSERT_EQ(runner("run " + a.string() + " --force").code, 0);
  ASSERT_EQ(runner("run " + b.string() + " --force").code, 0);
  auto c = runner("compare experiment:block_a experiment:block_b");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("WARNING: A and B ran in separate blocks of time, not interleaved "
                       "(interleaving 0.00; B's runs started "),
            std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("drift seen within the sides (step_time trend): A "), std::string::npos);
  EXPECT_NE(c.out.find("run the sides interleaved instead: 'runner run A.toml B.toml'"),
            std::string::npos);
  c = runner("compare experiment:block_a experiment:block_b --format json");
  EXPECT_NE(c.out.find("\"separate_blocks\":true"), std::string::npos) << c.out;
  // An explicit margin is the one the verdicts use.
  c = runner("compare experiment:block_a experiment:block_b --format csv --margin 50");
  EXPECT_NE(c.out.find("equivalent within +/-50.0%,"), std::string::npos) << c.out;
  c = runner("compare experiment:block_a experiment:block_b --margin -1");
  EXPECT_EQ(c.code, 2);
  EXPECT_EQ(c.err.substr(0, c.err.find('\n')),
            "error: --margin must be a percentage in [0, 100), found '-1'");
}

TEST_F(EnvironmentCliTest, BadInputIsRefusedBeforeAnythingIsWritten) {
  expect_refused(experiment("bad_allocator", "[runtime]\nallocator = \"hoard\"\n"),
                 "allocator = \"hoard\"",
                 "'runtime.allocator' must be one of \"system\", \"jemalloc\", \"tcmalloc\", "
                 "found \"hoard\"",
                 kGood);
  expect_refused(experiment("bad_cpus", "[runtime]\ncpu_affinity = \"4000\"\n"),
                 "cpu_affinity = \"4000\"",
                 "'runtime.cpu_affinity' names CPU 4000, which this machine does not have "
                 "(runner may use CPUs " + runner::format_cpu_list(runner::allowed_cpus()) + ")",
                 kGood);
  expect_refused(experiment("bad_env", "[env]\nOMP_NUM_THREADS = 4\n"), "OMP_NUM_THREADS = 4",
                 "'env.OMP_NUM_THREADS' must be a string, found an integer", kGood);
  EXPECT_FALSE(fs::exists(db_));
  // Files of one schedule must have distinct names.
  const fs::path a = experiment("twice", "");
  const auto r = runner("run " + a.string() + " " + a.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: " + a.string() + " and " + a.string() + " are both experiment 'twice'");
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(EnvironmentCliTest, AnInProcessRunCannotChangeItsEnvironment) {
  const fs::path file = experiment("inproc", "[env]\nTEST_ENV_ONLY_VAR = \"1\"\n");
  auto r = runner("run " + file.string() + " --isolate none");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: trial 1 needs a run process with its own environment ([env] "
            "TEST_ENV_ONLY_VAR), which --isolate none cannot give it");
  EXPECT_FALSE(fs::exists(db_));
  // The same value already in runner's environment: nothing to change, it runs.
  const ScopedEnv same("TEST_ENV_ONLY_VAR", "1");
  r = runner("run " + file.string() + " --isolate none");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(field(1, "env.TEST_ENV_ONLY_VAR"), "1");
}

}  // namespace
