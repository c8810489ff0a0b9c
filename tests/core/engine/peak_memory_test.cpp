// A run's memory figures (issue 36 item 6): the peak of the model's run over
// the measured steps, above the bytes live once the data were loaded, apart
// from the data the loader holds (data_set_bytes) and from the setup's peak.
#include "run_memory.hpp"

#include "engine_fixture.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runner/training/memory.hpp"

namespace {

using runner::test::EngineFixture;

constexpr std::int64_t kMiB = 1024 * 1024;

double value_of(const std::vector<runner::store::Metric>& metrics, const std::string& name) {
  for (const auto& m : metrics)
    if (m.name == name) return m.value;
  ADD_FAILURE() << "no metric " << name;
  return -1;
}

torch::Tensor bytes_of(std::int64_t n) { return torch::empty({n}, torch::kUInt8); }

class RunMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { runner::training::cpu_memory::install(); }
};

// Warm-up, the data and an evaluation each allocate more than the measured
// steps; only the measured steps' bytes above the data are the run's peak.
TEST_F(RunMemoryTest, PeakCoversTheMeasuredStepsAboveTheDataAndLeavesOutEvaluations) {
  const torch::Tensor before = bytes_of(3 * kMiB);  // an earlier run's leftovers: not this run's
  runner::RunMemory memory;
  torch::Tensor data;
  memory.count_data([&] {
    data = bytes_of(8 * kMiB);
    (void)bytes_of(32 * kMiB);  // a loader's temporary: the setup's peak, not the data set
  });
  const torch::Tensor weights = bytes_of(2 * kMiB);
  memory.begin_steps();
  (void)bytes_of(16 * kMiB);  // a warm-up step
  memory.restart_peak();
  (void)bytes_of(1 * kMiB);  // a measured step
  memory.pause();
  (void)bytes_of(64 * kMiB);  // a held-out evaluation
  memory.resume();
  (void)bytes_of(kMiB / 2);  // another measured step
  std::vector<runner::store::Metric> metrics;
  memory.add_metrics(metrics);
  EXPECT_EQ(value_of(metrics, "data_set_bytes"), 8 * kMiB);
  EXPECT_EQ(value_of(metrics, "peak_cpu_alloc_setup_bytes"), 8 * kMiB + 32 * kMiB);
  EXPECT_EQ(value_of(metrics, "peak_cpu_alloc_bytes"), 2 * kMiB + 1 * kMiB);
}

TEST_F(RunMemoryTest, ARunThatNeverSteppedHasOnlyItsSetupPeak) {
  runner::RunMemory memory;
  memory.count_data([] { (void)bytes_of(4 * kMiB); });
  std::vector<runner::store::Metric> metrics;
  memory.add_metrics(metrics);
  EXPECT_EQ(value_of(metrics, "data_set_bytes"), 0);
  EXPECT_EQ(value_of(metrics, "peak_cpu_alloc_setup_bytes"), 4 * kMiB);
  for (const auto& m : metrics) EXPECT_NE(m.name, "peak_cpu_alloc_bytes");
}

// ResNet-18 inference on the synthetic loader, as eager_vs_compiled runs it
// but on 3x96x96 images and a few batches, to stay fast.
constexpr std::int64_t kSide = 96;
constexpr std::int64_t kFeatures = 3 * kSide * kSide;

runner::Experiment resnet18_infer(std::int64_t batch, std::int64_t classes,
                                  std::int64_t size = 32) {
  runner::Experiment e;
  e.name = "peak-memory";
  e.kind = runner::RunKind::infer;
  e.seed = 0;
  e.model = {"resnet", runner::Options({{"depth", std::int64_t{18}},
                                        {"stem", std::string("imagenet")}})};
  e.data = runner::PluginChoice{
      "synthetic", runner::Options({{"shape", std::vector<std::int64_t>{3, kSide, kSide}},
                                    {"classes", classes},
                                    {"size", size},
                                    {"label_noise", 0.0},
                                    {"data_seed", std::int64_t{0}}})};
  e.data_settings.batch_size = batch;
  e.infer.batches = 2;
  e.infer.warmup = 1;
  return e;
}

class PeakMemoryTest : public EngineFixture {
 protected:
  runner::RunOutcome run_ok(const runner::Experiment& e) {
    runner::RunOutcome out = run(e);
    EXPECT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
    return out;
  }
};

TEST_F(PeakMemoryTest, ResNet18InferencePeakGrowsWithTheBatchAndHoldsTheWeights) {
  const runner::RunOutcome one = run_ok(resnet18_infer(1, 1000));
  const runner::RunOutcome many = run_ok(resnet18_infer(32, 1000));
  const double weights = 4 * metric(one, "parameters");
  EXPECT_GE(metric(one, "peak_cpu_alloc_bytes"), weights);
  // The stem's output alone, 64 channels at half the side in float32, for 31 more samples.
  const double stem_output = 31.0 * 64 * (kSide / 2) * (kSide / 2) * 4;
  EXPECT_GT(metric(many, "peak_cpu_alloc_bytes") - metric(one, "peak_cpu_alloc_bytes"),
            stem_output);
  EXPECT_EQ(metric(one, "data_set_bytes"), metric(many, "data_set_bytes"));
}

// The synthetic loader labels its samples with a random linear teacher of
// features x classes floats, a temporary of its construction (110 MB here at
// 1000 classes): the setup's peak, never the model's run.
TEST_F(PeakMemoryTest, ResNet18InferencePeakDoesNotMoveWithTheLoadersClasses) {
  const runner::RunOutcome few = run_ok(resnet18_infer(1, 10));
  const runner::RunOutcome many = run_ok(resnet18_infer(1, 1000));
  // What 990 more classes add to the model: the head's weights and bias.
  const double head = (metric(many, "parameters") - metric(few, "parameters")) * 4;
  EXPECT_EQ(head, 990.0 * (512 + 1) * 4);
  EXPECT_NEAR(metric(many, "peak_cpu_alloc_bytes") - metric(few, "peak_cpu_alloc_bytes"), head,
              256 * 1024);
  // The teacher is the setup's: its peak holds it, and the model's weights at 10 classes are less.
  const double teacher = 1000.0 * kFeatures * 4;
  EXPECT_GT(metric(many, "peak_cpu_alloc_setup_bytes"), teacher);
  EXPECT_GT(metric(many, "peak_cpu_alloc_setup_bytes") - metric(few, "peak_cpu_alloc_setup_bytes"),
            teacher / 2);
  EXPECT_EQ(metric(few, "data_set_bytes"), metric(many, "data_set_bytes"));
}

// The synthetic loader keeps its samples (float32) and labels (int64); with
// [eval] its eval split holds as many again.
TEST_F(PeakMemoryTest, DataSetBytesAreWhatTheLoadersHold) {
  const double per_sample = kFeatures * 4 + 8;
  const runner::RunOutcome small = run_ok(resnet18_infer(1, 10, 32));
  const runner::RunOutcome large = run_ok(resnet18_infer(1, 10, 64));
  EXPECT_EQ(metric(small, "data_set_bytes"), 32 * per_sample);
  EXPECT_EQ(metric(large, "data_set_bytes"), 64 * per_sample);
  runner::Experiment evaluated = resnet18_infer(1, 10, 32);
  evaluated.eval.enabled = true;
  evaluated.eval.batches = 1;
  const runner::RunOutcome with_eval = run_ok(evaluated);
  EXPECT_EQ(metric(with_eval, "data_set_bytes"), 2 * 32 * per_sample);
  // The data set is not the model's: the run's peak does not grow with it.
  EXPECT_NEAR(metric(large, "peak_cpu_alloc_bytes"), metric(small, "peak_cpu_alloc_bytes"),
              256 * 1024);
}

}  // namespace
