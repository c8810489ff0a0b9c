// Kernel experiments through the runner executable, on the test kernel
// plugins (tests/support/plugins/kernels_plugin.cpp): a right kernel is checked,
// timed over rotated buffers and reported against the measured copy
// bandwidth; a wrong value, an output left partly unwritten, a wrong
// gradient and constant inputs are each recorded failed with their figure
// and never timed; what the plugin cannot run is refused before any run
// (exit 2, at the key). The built-in kernels plugin: every kernel passes
// its gate with each implementation, and compare works on kernel runs.
#include <gtest/gtest.h>

#include <string>

#include "runner/experiment/experiment.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::query_int;
using runner::test::query_text;
using runner::test::Result;

class KernelCliTest : public runner::test::CliTestBase {
 protected:
  KernelCliTest() : CliTestBase("runner-kernel-cli-") {}

  // A kernel experiment on `kernel` of the test plugins, with more [kernel] lines.
  fs::path experiment(const std::string& kernel, const std::string& lines = "",
                      const std::string& rest = "") const {
    return write("kernel.toml", "[experiment]\nkind = \"kernel\"\n\n[kernel]\nplugin = \"" +
                                    kernel + "\"\nshape = [64, 33]\ncalls = 20\nwarmup = 2\n" +
                                    lines + rest);
  }
  Result run(const fs::path& file, const std::string& flags = "") const {
    return runner::test::run_runner("run " + file.string() + flags, dir_,
                                    {db_, runner::test::test_plugins("kernels")});
  }
  double metric(std::int64_t run, const std::string& name) const {
    const std::string text = query_text(db_, "SELECT value FROM metrics WHERE run_id = " +
                                                 std::to_string(run) + " AND name = '" + name + "'");
    return text.empty() ? -1.0 : std::stod(text);
  }
  // A run the gate failed: recorded failed with `error`, no sample, its error figure kept.
  void expect_not_timed(const std::string& kernel, const std::string& error) const {
    const Result r = run(experiment(kernel));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(query_text(db_, "SELECT status FROM runs"), "failed");
    EXPECT_EQ(query_text(db_, "SELECT error FROM runs"), error);
    EXPECT_EQ(query_int(db_, "SELECT count(*) FROM samples"), 0);
    EXPECT_EQ(query_int(db_, "SELECT count(*) FROM summaries"), 0);
    EXPECT_NE(r.err.find(error), std::string::npos) << r.err;
  }
};

TEST_F(KernelCliTest, ARightKernelIsCheckedThenTimedOverRotatedBuffers) {
  const Result r = run(experiment("good_scale", "", "\n[sweep]\n\"kernel.impl\" = [\"custom\", "
                                                    "\"native\", \"eager\"]\n"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished' AND kind = 'kernel'"),
            3);
  for (std::int64_t run = 1; run <= 3; ++run) {
    SCOPED_TRACE(run);
    // Every call a sample, the warm-up ones marked.
    EXPECT_EQ(query_int(db_, "SELECT count(*) FROM samples WHERE run_id = " + std::to_string(run)), 22);
    EXPECT_EQ(query_int(db_, "SELECT count(*) FROM samples WHERE warmup = 1 AND run_id = " +
                                 std::to_string(run)),
              2);
    EXPECT_EQ(query_int(db_, "SELECT n FROM summaries WHERE metric = 'call_time' AND run_id = " +
                                 std::to_string(run)),
              20);
    // Checked first: the float32 error of x * 2.5 is rounding only.
    EXPECT_GE(metric(run, "max_rel_error"), 0.0);
    EXPECT_LE(metric(run, "max_rel_error"), 1e-6);
    EXPECT_EQ(metric(run, "nan_outputs"), 0.0);
    // 64 x 33 float32 in and out: 16896 bytes a call; the working set is far
    // below the cache, so the sets rotate, enough to defeat it.
    EXPECT_EQ(metric(run, "bytes_per_call"), 2.0 * 64 * 33 * 4);
    EXPECT_EQ(metric(run, "flops_per_call"), 64.0 * 33);
    const double cache = metric(run, "cache_bytes");
    const double buffers = metric(run, "buffers");
    if (cache > 0) {
      // As many sets as twice the cache takes, up to kernel.buffers' limit;
      // a last-level cache too large for that many 17 KB sets (260 MiB on
      // some Xeons) is reported as not defeated, never claimed.
      const double working_set = metric(run, "working_set_bytes");
      const double limit = static_cast<double>(runner::kMaxKernelBuffers);
      EXPECT_GT(buffers, 1.0);
      if ((limit - 1) * working_set >= 2 * cache) {
        EXPECT_EQ(metric(run, "cache_defeated"), 1.0);
        EXPECT_GE((buffers - 1) * working_set, 2 * cache);
      } else {
        EXPECT_EQ(buffers, limit);
        EXPECT_EQ(metric(run, "cache_defeated"), 0.0);
      }
    }
    EXPECT_GT(metric(run, "bandwidth_bytes_per_s"), 0.0);
    EXPECT_GT(metric(run, "fraction_of_peak_bandwidth"), 0.0);
    // The overview's headline of a kernel run is its call time.
    EXPECT_EQ(query_text(db_, "SELECT p50_ns FROM run_overview WHERE run_id = " + std::to_string(run)),
              query_text(db_, "SELECT p50 FROM summaries WHERE metric = 'call_time' AND run_id = " +
                                  std::to_string(run)));
  }
  // Only the custom op's gradient is checked.
  EXPECT_GE(metric(1, "grad_max_rel_error"), 0.0);
  EXPECT_EQ(metric(2, "grad_max_rel_error"), -1.0);
  // The copy bandwidth, measured once for this fingerprint.
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM peak_bandwidth WHERE device = 'cpu' AND bytes_per_s > 0"),
            1);
  EXPECT_NE(r.out.find("call p50"), std::string::npos) << r.out;
  // runner compare reads kernel runs like any other.
  const Result compare = runner::test::run_runner("compare trial:1 trial:2", dir_, {db_, {}});
  EXPECT_EQ(compare.code, 0) << compare.err;
  EXPECT_NE(compare.out.find("call_time"), std::string::npos) << compare.out;
  EXPECT_NE(compare.out.find("bandwidth_bytes_per_s"), std::string::npos) << compare.out;
}

TEST_F(KernelCliTest, BuffersCanBeFixed) {
  ASSERT_EQ(run(experiment("good_scale", "buffers = 3\n")).code, 0);
  EXPECT_EQ(metric(1, "buffers"), 3.0);
}

TEST_F(KernelCliTest, AWrongValueIsRecordedFailedAndNotTimed) {
  expect_not_timed("wrong_scale",
                   "the custom implementation of kernel 'wrong_scale' (float32 [64, 33]) is wrong: "
                   "max relative error 0.001 > tolerance 1e-06 against the float64 reference; "
                   "not timed");
  EXPECT_NEAR(metric(1, "max_rel_error"), 1e-3, 1e-6);
}

TEST_F(KernelCliTest, AnOutputLeftPartlyUnwrittenIsCaughtByThePoison) {
  expect_not_timed("half_written",
                   "the custom implementation of kernel 'half_written' (float32 [64, 33]) is "
                   "wrong: 1056 of 2112 output elements are NaN after the call (the output was "
                   "filled with NaN before it: elements left unwritten, or computed as NaN); not "
                   "timed");
  EXPECT_EQ(metric(1, "nan_outputs"), 1056.0);
}

TEST_F(KernelCliTest, AWrongGradientIsRecordedFailedAndNotTimed) {
  expect_not_timed("wrong_grad",
                   "the custom implementation of kernel 'wrong_grad' (float32 [64, 33]) is wrong: "
                   "its gradient of input 0 has max relative error 1 > tolerance 1e-06 against "
                   "the float64 reference's; not timed");
  EXPECT_NEAR(metric(1, "grad_max_rel_error"), 1.0, 1e-6);
  // The forward was right.
  EXPECT_LE(metric(1, "max_rel_error"), 1e-6);
}

TEST_F(KernelCliTest, ConstantInputsAreRefused) {
  expect_not_timed("constant_inputs",
                   "kernel plugin 'constant_inputs' made input 0 with every element equal to 1");
}

TEST_F(KernelCliTest, WhatThePluginCannotRunIsRefusedBeforeAnyRun) {
  const fs::path plugins = runner::test::test_plugins("kernels");
  expect_refused(experiment("float32_only", "dtype = \"float64\"\n"), "dtype = \"float64\"",
                 "kernel plugin 'float32_only' does not compute in float64", plugins);
  expect_refused(write("kernel.toml",
                       "[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"good_scale\"\n"
                       "shape = [2, 3, 4]\n"),
                 "shape = [2, 3, 4]",
                 "kernel plugin 'good_scale' cannot take shape [2, 3, 4]: it takes rank 1 or 2",
                 plugins);
  expect_refused(experiment("cuda_only", "", "[device]\ntype = \"cpu\"\n"), "type = \"cpu\"",
                 "kernel plugin 'cuda_only' has no CPU implementation of op "
                 "'test_kernels::cuda_scale'",
                 plugins);
  expect_refused(experiment("unregistered_op"), "plugin = \"unregistered_op\"",
                 "kernel plugin 'unregistered_op' uses op 'test_kernels::nothing', which no "
                 "loaded library registers",
                 plugins);
  expect_refused(experiment("no_such_kernel"), "plugin = \"no_such_kernel\"",
                 "unknown kernel plugin 'no_such_kernel'", plugins);
  expect_refused(experiment("good_scale", "factor = 1e9\n"), "factor = 1e9",
                 "'kernel.factor' must be between -1e+06 and 1e+06, found 1e+09",
                 plugins);
}

TEST_F(KernelCliTest, ACpuOnlyOpMayStillBeComparedThroughItsNativeComposition) {
  // impl = "native" runs ATen's kernels: the plugin's missing CPU op does not matter.
  const Result r = run(experiment("cuda_only", "impl = \"native\"\n"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query_text(db_, "SELECT status FROM runs"), "finished");
}

TEST_F(KernelCliTest, EveryBuiltInKernelPassesItsGateWithEachImplementation) {
  // Odd sizes (vector tails on every ISA), float32 and bfloat16, each
  // implementation: all checked against float64 (and their gradients, for
  // the custom ops), then timed.
  const fs::path file = write(
      "builtin.toml",
      "[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\nshape = [33, 257]\n"
      "calls = 3\nwarmup = 1\nbuffers = 2\n"
      "[[trial]]\n\"kernel.plugin\" = \"scale\"\n"
      "[[trial]]\n\"kernel.plugin\" = \"bias_gelu\"\n"
      "[[trial]]\n\"kernel.plugin\" = \"bias_gelu\"\n\"kernel.approximate\" = \"tanh\"\n"
      "[[trial]]\n\"kernel.plugin\" = \"softmax\"\n"
      "[[trial]]\n\"kernel.plugin\" = \"rmsnorm\"\n"
      "[[trial]]\n\"kernel.plugin\" = \"layernorm\"\n"
      "[sweep]\n\"kernel.dtype\" = [\"float32\", \"bfloat16\"]\n"
      "\"kernel.impl\" = [\"custom\", \"native\", \"eager\"]\n");
  const Result r = runner::test::run_runner("run " + file.string(), dir_, {db_, {}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 36);
  // Every run passed within its tolerance, and every custom op's gradients were checked.
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM metrics AS e JOIN metrics AS t ON e.run_id = "
                           "t.run_id AND e.name = 'max_rel_error' AND t.name = 'tolerance' "
                           "WHERE e.value <= t.value"),
            36);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM metrics WHERE name = 'grad_max_rel_error'"), 12);
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM samples WHERE warmup = 0"), 36 * 3);
}

}  // namespace
