// A run's memory figures on a GPU (issue 36 item 6): the same windows as on
// the CPU, read from the caching allocator. Skipped without a CUDA device.
#include "run_memory.hpp"

#include "engine_fixture.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runner/training/memory.hpp"

namespace {

namespace cuda = runner::training::cuda_memory;

constexpr std::int64_t kMiB = 1024 * 1024;

double value_of(const std::vector<runner::store::Metric>& metrics, const std::string& name) {
  for (const auto& m : metrics)
    if (m.name == name) return m.value;
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

// Whole MiB: a multiple of the caching allocator's rounding, so counted exactly.
torch::Tensor device_bytes(std::int64_t n) {
  return torch::empty({n}, torch::TensorOptions(torch::kCUDA).dtype(torch::kUInt8));
}

TEST(RunMemoryCuda, PeakCoversTheMeasuredStepsAboveTheStartAndLeavesOutEvaluations) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  const torch::Tensor before = device_bytes(3 * kMiB);  // an earlier run's: not this run's
  runner::RunMemory memory;
  memory.add_cuda(0);
  memory.count_data([] {});  // the loaders keep their data on the host
  const torch::Tensor weights = device_bytes(2 * kMiB);
  (void)device_bytes(32 * kMiB);  // a temporary of the setup
  memory.begin_steps();
  (void)device_bytes(16 * kMiB);  // a warm-up step
  memory.restart_peak();
  (void)device_bytes(4 * kMiB);  // a measured step
  memory.pause();
  (void)device_bytes(64 * kMiB);  // a held-out evaluation
  memory.resume();
  std::vector<runner::store::Metric> metrics;
  memory.add_metrics(metrics);
  EXPECT_EQ(value_of(metrics, "peak_cuda_allocated_setup_bytes"), 2 * kMiB + 32 * kMiB);
  EXPECT_EQ(value_of(metrics, "peak_cuda_allocated_bytes"), 2 * kMiB + 4 * kMiB);
}

class PeakMemoryCudaTest : public runner::test::EngineFixture {};

runner::Experiment resnet18_infer_cuda(std::int64_t batch) {
  runner::Experiment e;
  e.name = "peak-memory-cuda";
  e.kind = runner::RunKind::infer;
  e.seed = 0;
  e.device.type = "cuda";
  e.model = {"resnet", runner::Options({{"depth", std::int64_t{18}},
                                        {"stem", std::string("imagenet")}})};
  e.data = runner::PluginChoice{
      "synthetic", runner::Options({{"shape", std::vector<std::int64_t>{3, 96, 96}},
                                    {"classes", std::int64_t{1000}},
                                    {"size", std::int64_t{32}},
                                    {"label_noise", 0.0},
                                    {"data_seed", std::int64_t{0}}})};
  e.data_settings.batch_size = batch;
  e.infer.batches = 2;
  e.infer.warmup = 1;
  return e;
}

TEST_F(PeakMemoryCudaTest, ResNet18InferencePeakGrowsWithTheBatchAndHoldsTheWeights) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device";
  const runner::RunOutcome one = run(resnet18_infer_cuda(1));
  const runner::RunOutcome many = run(resnet18_infer_cuda(32));
  ASSERT_EQ(one.status, runner::store::RunStatus::finished) << one.error;
  ASSERT_EQ(many.status, runner::store::RunStatus::finished) << many.error;
  EXPECT_GE(metric(one, "peak_cuda_allocated_bytes"), 4 * metric(one, "parameters"));
  const double stem_output = 31.0 * 64 * 48 * 48 * 4;
  EXPECT_GT(metric(many, "peak_cuda_allocated_bytes") - metric(one, "peak_cuda_allocated_bytes"),
            stem_output);
  // The synthetic loader's data (and its teacher) stay on the host.
  EXPECT_EQ(metric(one, "data_set_bytes"), 32.0 * (3 * 96 * 96 * 4 + 8));
  EXPECT_LT(metric(one, "peak_cuda_allocated_setup_bytes"), 1000.0 * 3 * 96 * 96 * 4);
}

}  // namespace
