#include "runner/fingerprint/fingerprint.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "runner/common/json.hpp"

namespace {

TEST(Fingerprint, HasTheDocumentedFieldsAndGpuFieldsEvenWithoutAGpu) {
  const runner::Fingerprint fp = runner::collect_fingerprint(3);
  for (const char* key :
       {"host.hostname", "host.os", "host.kernel", "cpu.model", "cpu.logical_cores", "cpu.isa",
        "memory.total", "software.runner_version", "software.git_commit",
        "software.torch_version", "software.torch_config", "software.compiler",
        "threads.intra_op", "threads.inter_op", "gpu.count", "gpu.name", "gpu.driver",
        "gpu.cudnn", "flags.cudnn_benchmark", "flags.float32_matmul_precision", "seed"})
    EXPECT_EQ(fp.fields.count(key), 1u) << key;
  EXPECT_EQ(fp.fields.at("seed"), "3");
  EXPECT_FALSE(fp.fields.at("software.torch_version").empty());
  EXPECT_GE(std::stoi(fp.fields.at("threads.intra_op")), 1);
}

TEST(Fingerprint, IsStableAndChangesWithPerformanceEnvironment) {
  const auto a = runner::collect_fingerprint(0);
  const auto b = runner::collect_fingerprint(0);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash().size(), 64u);
  ::setenv("OMP_SCHEDULE_RUNNER_TEST", "static", 1);
  const auto c = runner::collect_fingerprint(0);
  ::unsetenv("OMP_SCHEDULE_RUNNER_TEST");
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_EQ(c.fields.at("env.OMP_SCHEDULE_RUNNER_TEST"), "static");
  // Unrelated variables are not part of it.
  ::setenv("RUNNER_UNRELATED_TEST_VAR", "1", 1);
  EXPECT_EQ(runner::collect_fingerprint(0).hash(), a.hash());
  ::unsetenv("RUNNER_UNRELATED_TEST_VAR");
}

TEST(Fingerprint, JsonRoundTrips) {
  const auto fp = runner::collect_fingerprint(1);
  EXPECT_EQ(runner::parse_json_object(fp.json()), fp.fields);
}

// Fingerprints are stored once per hash, so their JSON must not change by a
// byte either, or every existing database would get a second copy of each
// environment. Recorded from the hand-written JSON writer of commit 206220a.
TEST(Fingerprint, JsonOfTrickyFieldsKeepsItsRecordedTextAndHash) {
  runner::Fingerprint fp;
  fp.fields = {{"", "empty key"},
               {"B", "upper case sorts first"},
               {"a", "quote \" backslash \\ slash /"},
               {"a.b", ""},
               {"a_b", "control \x01\x1f\t\n\r\b\f delete \x7f"},
               {"cpu.model", "Intel(R) Xeon(R) CPU @ 2.20GHz"},
               {"env.LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"},
               {"utf8", "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8"},
               {"\xc3\xa9", "non-ASCII key"}};
  EXPECT_EQ(fp.json(),
            R"({"":"empty key","B":"upper case sorts first","a":"quote \" backslash \)"
            R"(\ slash /","a.b":"","a_b":"control \u0001\u001f\t\n\r\b\f delete )" "\x7f" R"(",)"
            R"("cpu.model":"Intel(R) Xeon(R) CPU @ 2.20GHz","env.LD_PRELOAD":"/usr/li)"
            R"(b/x86_64-linux-gnu/libjemalloc.so.2","utf8":"é € 😀 )" "\xe2\x80\xa8" R"(",)"
            R"("é":"non-ASCII key"})");
  EXPECT_EQ(fp.hash(), "0744fed0fe3aa8958caf5be213e0bdca5043fdf515c42a0e87b58206362a6307");
}

TEST(Fingerprint, PerformanceEnvironmentVariables) {
  for (const char* name : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "KMP_AFFINITY",
                           "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG", "NCCL_DEBUG",
                           "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_CUDA_ALLOC_CONF", "LD_PRELOAD"})
    EXPECT_TRUE(runner::is_performance_env_var(name)) << name;
  for (const char* name : {"HOME", "PATH", "RUNNER_DB", "TERM"})
    EXPECT_FALSE(runner::is_performance_env_var(name)) << name;
}

}  // namespace

// The part of the fingerprint in a trial's identity: what it holds, that a
// run's [env] is set over this process's environment, and the changes a dry
// run names.
TEST(IdentityFingerprint, HoldsTheBuildTheCpuTheCpusAndThePerformanceEnvironment) {
  ::setenv("OMP_NUM_THREADS", "3", 1);
  ::setenv("RUNNER_FP_TEST_OTHER", "x", 1);
  const runner::Fingerprint a = runner::identity_fingerprint({}, "0-1");
  EXPECT_EQ(a.fields.at("runtime.cpus"), "0-1");
  EXPECT_EQ(a.fields.at("env.OMP_NUM_THREADS"), "3");
  EXPECT_EQ(a.fields.count("env.RUNNER_FP_TEST_OTHER"), 0u);  // not performance-relevant
  for (const char* key : {"software.runner_version", "software.torch_version", "software.build_type",
                          "software.cuda_code_paths", "cpu.model", "cpu.logical_cores", "cpu.isa"})
    EXPECT_EQ(a.fields.count(key), 1u) << key;
  EXPECT_EQ(a.fields.count("host.hostname"), 0u);
  EXPECT_EQ(a.fields.count("software.git_commit"), 0u);
  // [env] is set over this process's environment, whatever the name.
  const runner::Fingerprint b =
      runner::identity_fingerprint({{"OMP_NUM_THREADS", "1"}, {"MY_FLAG", "on"}}, "0-1");
  EXPECT_EQ(b.fields.at("env.OMP_NUM_THREADS"), "1");
  EXPECT_EQ(b.fields.at("env.MY_FLAG"), "on");
  EXPECT_NE(a.hash(), b.hash());
  EXPECT_EQ(runner::identity_fingerprint({}, "0-1").hash(), a.hash());
  EXPECT_NE(runner::identity_fingerprint({}, "0").hash(), a.hash());
  EXPECT_EQ(runner::fingerprint_changes(a.json(), b.json()),
            (std::vector<std::string>{"env.MY_FLAG: (unset) -> on", "env.OMP_NUM_THREADS: 3 -> 1"}));
  ::unsetenv("OMP_NUM_THREADS");
  ::unsetenv("RUNNER_FP_TEST_OTHER");
}

TEST(IdentityFingerprint, ChangesAreListedByName) {
  EXPECT_TRUE(runner::fingerprint_changes(R"({"a":"1"})", R"({"a":"1"})").empty());
  EXPECT_EQ(runner::fingerprint_changes(R"({"a":"1","b":""})", R"({"a":"2","c":"x"})"),
            (std::vector<std::string>{"a: 1 -> 2", "b: \"\" -> (unset)", "c: (unset) -> x"}));
  // Not JSON: everything on the other side is new.
  EXPECT_EQ(runner::fingerprint_changes("not json", R"({"a":"1"})"),
            std::vector<std::string>{"a: (unset) -> 1"});
}
