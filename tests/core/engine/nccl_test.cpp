// The NCCL path of a data-parallel run: 2 ranks on 2 CUDA devices with the
// Reducer and each comm hook. Compiled in every CUDA build; it needs two
// GPUs to run (label gpu) and skips without them.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "engine_fixture.hpp"

namespace {

class NcclTest : public runner::test::EngineFixture {};

TEST_F(NcclTest, TwoRanksOnTwoGpusTrainWithEveryHook) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  for (const std::string hook : {"allreduce", "fp16_compress", "bf16_compress"}) {
    runner::Experiment e = runner::test::mlp_sgd("nccl", 0, 256);
    e.device.type = "cuda";
    e.distributed.enabled = true;
    e.distributed.world_size = 2;
    e.distributed.backend = "nccl";
    e.distributed.timeout_s = 60;
    e.comm_hook = runner::PluginChoice{hook, runner::Options{}, {}};
    e.train.steps = 20;
    e.train.warmup = 2;
    const auto out = run(e);
    ASSERT_EQ(out.status, runner::store::RunStatus::finished) << hook << ": " << out.error;
    EXPECT_EQ(metric(out, "world_size"), 2) << hook;
    EXPECT_EQ(metric(out, "ranks_reporting_times"), 2) << hook;
    EXPECT_LT(metric(out, "loss_final"), metric(out, "loss_initial")) << hook;
    EXPECT_EQ(metric(out, "compression_ratio"), hook == "allreduce" ? 1.0 : 2.0) << hook;
  }
}

}  // namespace
