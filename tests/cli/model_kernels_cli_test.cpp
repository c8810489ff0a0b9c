// End to end: `runner run ... --set model.norm_op=runner::layernorm --set
// model.activation_op=runner::bias_gelu` trains transformer_lm through the
// built-in kernels plugin's ops (loaded with the other built-in plugins),
// records the ops as run attributes, and ends at the loss of the same run
// on ATen's path.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support/cli_harness.hpp"

namespace {

using runner::test::query_text;

constexpr const char* kTinyLm = R"([experiment]
name = "ops_e2e"
kind = "train"

[device]
type = "cpu"
threads = 1

[model]
plugin = "transformer_lm"
width = 32
depth = 2
heads = 2

[data]
plugin = "synthetic_tokens"
vocab = 64
seq_len = 16
size = 64
batch_size = 4

[optimizer]
plugin = "sgd"
lr = 0.1

[train]
steps = 5
warmup = 0
)";

class ModelKernelsCli : public runner::test::CliTestBase {
 protected:
  ModelKernelsCli() : CliTestBase("runner-model-kernels-") {}
  // The built-in plugins, which the runner loads from next to itself.
  runner::test::Result run(const std::string& args) const {
    runner::test::RunnerPaths paths;
    paths.db = db_;
    return runner::test::run_runner(args, dir_, paths);
  }
};

TEST_F(ModelKernelsCli, TrainsThroughTheKernelPluginsOpsAndRecordsThem) {
  const auto file = write("lm.toml", kTinyLm);
  const auto aten = run("run " + file.string());
  ASSERT_EQ(aten.code, 0) << aten.err;
  const auto ops = run("run " + file.string() +
                       " --set model.norm_op=runner::layernorm --set "
                       "model.activation_op=runner::bias_gelu");
  ASSERT_EQ(ops.code, 0) << ops.err;

  EXPECT_EQ(query_text(db_, "SELECT group_concat(status, ',') FROM (SELECT status FROM runs "
                            "ORDER BY id)"),
            "finished,finished");
  EXPECT_EQ(query_text(db_, "SELECT count(*) FROM run_attributes WHERE run_id = 1"), "0");
  const std::string norm =
      query_text(db_, "SELECT value FROM run_attributes WHERE run_id = 2 AND name = 'model.norm_op'");
  EXPECT_EQ(norm.rfind(
                "runner::layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor, "
                "registered at ",
                0),
            0U)
      << norm;
  const std::string activation = query_text(
      db_, "SELECT value FROM run_attributes WHERE run_id = 2 AND name = 'model.activation_op'");
  EXPECT_EQ(activation.rfind("runner::bias_gelu(", 0), 0U) << activation;

  // The same seed, the same weights, the same function: the same losses
  // after five steps, up to float32 rounding.
  auto loss = [&](int run) {
    return std::stod(query_text(db_, "SELECT value FROM metrics WHERE run_id = " +
                                         std::to_string(run) + " AND name = 'loss_final'"));
  };
  EXPECT_NEAR(loss(2), loss(1), 1e-4 * std::abs(loss(1)));
  EXPECT_LT(loss(1), std::stod(query_text(
                         db_, "SELECT value FROM metrics WHERE run_id = 1 AND name = "
                              "'loss_initial'")));
}

}  // namespace
