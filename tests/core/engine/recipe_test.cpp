// The training recipe in the engine: gradient accumulation, precision modes,
// channels-last, clipping and schedules as a run records them, and the checks
// that refuse a recipe before any run starts. (Parity of each unit with
// PyTorch: tests/core/training; of whole runs: tests/cli/recipes.)
#include <gtest/gtest.h>

#include <cmath>

#include "engine_fixture.hpp"
#include "runner/engine/engine.hpp"
#include "runner/engine/phase_clock.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using runner::store::Phase;
using runner::test::synthetic_options;

runner::Options images(std::vector<std::int64_t> shape, std::int64_t size = 256) {
  return synthetic_options(std::move(shape), size);
}

runner::PluginChoice choice(std::string plugin, runner::Options options) {
  return runner::PluginChoice{std::move(plugin), std::move(options)};
}

// Six recorded steps of 16 samples in file order: short runs whose batches
// the tests can line up.
runner::Experiment small_mlp() {
  runner::Experiment e = runner::test::mlp_sgd("recipe-test", 3);
  e.data = choice("synthetic", images({16}));
  e.data_settings.batch_size = 16;
  e.data_settings.shuffle = false;
  e.train.steps = 6;
  e.train.warmup = 0;
  return e;
}

using RecipeTest = runner::test::EngineFixture;

TEST(PhaseClockTest, APhaseMarkedTwiceInAStepAccumulates) {
  // Work between every mark: the marks cover the step without gaps, so the
  // phases sum to the step's time only if repeated marks add up (a mark that
  // overwrote its phase would lose two of the seven intervals).
  const auto work = [] {
    volatile double x = 0;
    for (int i = 0; i < 300000; ++i) x = x + 1;
  };
  runner::CpuPhaseClock clock;
  clock.begin_step();
  for (int micro = 0; micro < 2; ++micro) {
    for (const Phase phase : {Phase::data, Phase::forward, Phase::backward}) {
      work();
      clock.end_phase(phase);
    }
  }
  work();
  clock.end_phase(Phase::optimizer);
  const runner::StepTimes t = clock.end_step();
  double sum = 0;
  for (const Phase phase : {Phase::data, Phase::forward, Phase::backward, Phase::optimizer})
    sum += t.phase_ns[runner::store::phase_index(phase)];
  EXPECT_LE(sum, t.wall_ns);
  EXPECT_GT(sum, 0.95 * t.wall_ns);
}

TEST_F(RecipeTest, AccumulationCountsEverySampleAndMatchesOneLargerBatch) {
  // 288 samples: six steps of 48, or of 3 x 16, within one epoch, in order.
  runner::Experiment big = small_mlp();
  big.data = choice("synthetic", images({16}, 288));
  big.data_settings.batch_size = 48;
  runner::Experiment accumulated = big;
  accumulated.data_settings.batch_size = 16;
  accumulated.train.accumulate = 3;
  const auto a = run(accumulated);
  const auto b = run(big);
  ASSERT_EQ(a.status, runner::store::RunStatus::finished) << a.error;
  ASSERT_EQ(b.status, runner::store::RunStatus::finished) << b.error;
  ASSERT_EQ(a.samples.size(), 6u);
  for (std::size_t i = 0; i < a.samples.size(); ++i)
    EXPECT_NEAR(a.samples[i].loss, b.samples[i].loss, 1e-5) << "step " << i;
  // samples/s counts the micro-batches' samples: 48 per step.
  double wall_ns = 0;
  for (const auto& s : a.samples) wall_ns += s.wall_ns;
  EXPECT_NEAR(metric(a, "samples_per_s"), 6 * 48 / (wall_ns * 1e-9),
              1e-6 * metric(a, "samples_per_s"));
}

TEST_F(RecipeTest, Bf16TrainsInBf16AndAmpRecordsItsScale) {
  runner::Experiment bf16 = small_mlp();
  bf16.train.precision = "bf16";
  const auto a = run(bf16);
  ASSERT_EQ(a.status, runner::store::RunStatus::finished) << a.error;
  const auto fp32 = run(small_mlp());
  // bf16 rounds: the losses differ from fp32's, but not by much.
  EXPECT_NE(a.samples[0].loss, fp32.samples[0].loss);
  EXPECT_NEAR(a.samples[0].loss, fp32.samples[0].loss, 0.05);

  runner::Experiment amp = small_mlp();
  amp.train.precision = "amp_fp16";
  const auto c = run(amp);
  ASSERT_EQ(c.status, runner::store::RunStatus::finished) << c.error;
  for (const auto& s : c.samples) {
    EXPECT_EQ(s.loss_scale, 65536.0);
    EXPECT_EQ(s.skipped, 0);
  }
  EXPECT_EQ(metric(c, "skipped_steps"), 0);
  EXPECT_EQ(metric(c, "loss_scale_final"), 65536.0);
  for (const auto& s : fp32.samples) {
    EXPECT_TRUE(std::isnan(s.loss_scale));
    EXPECT_EQ(s.skipped, -1);
    EXPECT_EQ(s.lr, 0.1);  // recorded without a schedule too
  }
}

TEST_F(RecipeTest, ClippingRecordsTheNormBeforeClippingAndAScheduleItsLr) {
  runner::Experiment e = small_mlp();
  e.train.clip_grad_norm = 1e-3;  // clips every step
  e.schedule.enabled = true;
  e.schedule.type = "step";
  e.schedule.step_size = 2;
  e.schedule.gamma = 0.5;
  const auto out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  const std::vector<double> lrs{0.1, 0.1, 0.05, 0.05, 0.025, 0.025};
  ASSERT_EQ(out.samples.size(), lrs.size());
  for (std::size_t i = 0; i < lrs.size(); ++i) {
    EXPECT_DOUBLE_EQ(out.samples[i].lr, lrs[i]) << "step " << i;
    EXPECT_GT(out.samples[i].grad_norm, 1e-3) << "step " << i;
  }
  bool found = false;
  for (const auto& s : out.summaries) found = found || s.metric == "grad_norm";
  EXPECT_TRUE(found);
}

TEST_F(RecipeTest, ChannelsLastTrainsAConvNetAndIsRefusedForAnMlp) {
  runner::Experiment e = small_mlp();
  e.model = choice("convnet", runner::Options({{"channels", std::vector<std::int64_t>{8, 16}},
                                               {"batch_norm", true},
                                               {"dropout", 0.0}}));
  e.data = choice("synthetic", images({3, 8, 8}));
  e.model_settings.channels_last = true;
  const auto out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  runner::Experiment plain = e;
  plain.model_settings.channels_last = false;
  const auto reference = run(plain);
  // The same math in another memory layout: the same losses up to summation order.
  for (std::size_t i = 0; i < out.samples.size(); ++i)
    EXPECT_NEAR(out.samples[i].loss, reference.samples[i].loss, 1e-4) << "step " << i;

  runner::Experiment mlp = small_mlp();
  mlp.model_settings.channels_last = true;
  EXPECT_THROW_MSG(runner::check_before_runs(mlp, host_, "cpu"), runner::Error,
                   "model.channels_last needs image samples [channels, height, width]; the "
                   "loader's samples have shape [16]");
}

TEST_F(RecipeTest, OneCycleNeedsAnOptimizerWithMomentum) {
  runner::Experiment e = small_mlp();
  e.schedule.enabled = true;
  e.schedule.type = "one_cycle";
  // sgd has momentum: accepted.
  EXPECT_NO_THROW(runner::check_before_runs(e, host_, "cpu"));
  e.schedule.cycle_momentum = true;
  const auto out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  // The lr rises from lr / div_factor to lr (pct_start of the 6 steps), then falls.
  EXPECT_NEAR(out.samples[0].lr, 0.1 / 25, 1e-12);
  EXPECT_GT(out.samples[1].lr, out.samples[0].lr);
  EXPECT_LT(out.samples[5].lr, out.samples[2].lr);
}

}  // namespace
