// Train and infer loops end to end through real plugin libraries.
#include "runner/engine/engine.hpp"

#include "engine_fixture.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cmath>

#include "runner/engine/sampler.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

using runner::store::Phase;

const fs::path kGood = fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / "good";
const fs::path kExamples = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "examples";
// What a run records when tiny_linear's forward throws: the plugin and its library named.
const std::string kForwardFailed =
    "model plugin 'tiny_linear' (" + fs::canonical(kGood / "runner_plugin_test_good.so").string() +
    ") failed in forward: forward failed on purpose";

runner::Experiment mlp_experiment() {
  runner::Experiment e = runner::test::mlp_sgd("engine-test", 7);
  e.train.steps = 60;
  e.train.warmup = 5;
  return e;
}

class EngineTest : public runner::test::EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    host_.load(kGood);
    host_.load(kExamples);
  }
};

const runner::store::Summary* summary(const runner::RunOutcome& o, const std::string& name) {
  for (const auto& s : o.summaries)
    if (s.metric == name) return &s;
  return nullptr;
}

TEST_F(EngineTest, TrainRecordsEveryStepWithPhasesAndTheLossGoesDown) {
  const runner::Experiment e = mlp_experiment();
  const runner::RunOutcome out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  ASSERT_EQ(out.samples.size(), 65u);
  for (std::size_t i = 0; i < out.samples.size(); ++i) {
    const auto& s = out.samples[i];
    EXPECT_EQ(s.step, static_cast<std::int64_t>(i));
    EXPECT_EQ(s.warmup, i < 5);
    EXPECT_GT(s.wall_ns, 0);
    EXPECT_GE(s.phase(Phase::data), 0);
    EXPECT_GT(s.phase(Phase::forward), 0);
    EXPECT_GT(s.phase(Phase::backward), 0);
    EXPECT_GT(s.phase(Phase::optimizer), 0);
    // Phases are consecutive intervals inside the step.
    EXPECT_LE(s.phase(Phase::data) + s.phase(Phase::forward) + s.phase(Phase::backward) +
                  s.phase(Phase::optimizer),
              s.wall_ns * 1.0001);
    EXPECT_TRUE(std::isfinite(s.loss));
  }
  EXPECT_LT(metric(out, "loss_final"), 0.6 * metric(out, "loss_initial"));
  const auto* step_time = summary(out, "step_time");
  ASSERT_NE(step_time, nullptr);
  EXPECT_EQ(step_time->n, 60);
  EXPECT_LE(step_time->min, step_time->p50);
  EXPECT_LE(step_time->p50, step_time->p90);
  EXPECT_LE(step_time->p99, step_time->max);
  for (const char* phase : {"data", "forward", "backward", "optimizer"})
    EXPECT_NE(summary(out, phase), nullptr) << phase;
  EXPECT_EQ(metric(out, "measured_steps"), 60);
  EXPECT_GT(metric(out, "samples_per_s"), 0);
  EXPECT_EQ(metric(out, "parameters"), 16 * 32 + 32 + 32 * 4 + 4);
  EXPECT_EQ(metric(out, "flops_per_sample"), 2.0 * (16 * 32 + 32 * 4));
  EXPECT_GT(metric(out, "peak_rss_bytes"), 1e6);
}

TEST_F(EngineTest, SameSeedGivesTheSameLossCurve) {
  const runner::Experiment e = mlp_experiment();
  const auto a = run(e);
  const auto b = run(e);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (std::size_t i = 0; i < a.samples.size(); ++i)
    EXPECT_DOUBLE_EQ(a.samples[i].loss, b.samples[i].loss) << "step " << i;
  runner::Experiment other = mlp_experiment();
  other.seed = 8;
  EXPECT_NE(run(other).samples[0].loss, a.samples[0].loss);
}

// The worked examples of docs/plugins.md, trained: the convnet model and the
// grouped_adamw optimizer (typed options, parameter groups from named parameters).
runner::PluginChoice grouped_adamw(double lr) {
  return {"grouped_adamw",
          runner::Options({{"lr", lr},
                           {"betas", std::vector<double>{0.9, 0.999}},
                           {"eps", 1e-8},
                           {"weight_decay", 0.01},
                           {"no_decay", std::vector<std::string>{"bias", "norm"}}}),
          {}};
}

TEST_F(EngineTest, TheConvNetLearnsWithTheGroupedAdamWExample) {
  runner::Experiment e = mlp_experiment();
  e.model = {"convnet",
             runner::Options({{"channels", std::vector<std::int64_t>{8, 16}},
                              {"batch_norm", true},
                              {"dropout", 0.0}}),
             {}};
  e.data = runner::PluginChoice{
      "synthetic",
      runner::Options({{"shape", std::vector<std::int64_t>{3, 8, 8}},
                       {"classes", std::int64_t{4}},
                       {"size", std::int64_t{512}},
                       {"label_noise", 0.0},
                       {"data_seed", std::int64_t{0}}}),
      {}};
  e.optimizer = grouped_adamw(0.01);
  e.train.steps = 80;
  const runner::RunOutcome out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  EXPECT_LT(metric(out, "loss_final"), 0.7 * metric(out, "loss_initial"));
  EXPECT_EQ(metric(out, "flops_per_sample"),
            2.0 * (3 * 9 * 8 * 8 * 8 + 8 * 9 * 16 * 4 * 4 + 16 * 2 * 2 * 4));
}

TEST_F(EngineTest, TheMlpLearnsWithTheGroupedAdamWExample) {
  runner::Experiment e = mlp_experiment();
  e.optimizer = grouped_adamw(0.01);
  const runner::RunOutcome out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  EXPECT_LT(metric(out, "loss_final"), 0.6 * metric(out, "loss_initial"));
}

TEST_F(EngineTest, InferMeasuresLatencyWithoutBackwardOrOptimizer) {
  runner::Experiment e = mlp_experiment();
  e.kind = runner::RunKind::infer;
  e.optimizer.reset();
  e.infer.batches = 40;
  e.infer.warmup = 3;
  for (const std::string mode : {"inference", "no_grad"}) {
    e.infer.mode = mode;
    const auto out = run(e);
    ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
    ASSERT_EQ(out.samples.size(), 43u);
    EXPECT_LT(out.samples[0].phase(Phase::backward), 0);
    EXPECT_LT(out.samples[0].phase(Phase::optimizer), 0);
    EXPECT_TRUE(std::isnan(out.samples[0].loss));
    const auto* latency = summary(out, "latency");
    ASSERT_NE(latency, nullptr);
    EXPECT_EQ(latency->n, 40);
    EXPECT_LE(latency->p50, latency->p99);
    EXPECT_EQ(summary(out, "step_time"), nullptr);
  }
}

TEST_F(EngineTest, InferWithoutLoaderUsesTheModelsExampleBatch) {
  runner::Experiment e;
  e.kind = runner::RunKind::infer;
  e.model = {"tiny_linear",
             runner::Options({{"throw_at_step", std::int64_t{-1}},
                              {"nan_at_step", std::int64_t{-1}},
                              {"crash_at_step", std::int64_t{-1}},
                              {"hang_at_step", std::int64_t{-1}},
                              {"kill_at_step", std::int64_t{-1}},
                              {"hang_in_factory", false},
                              {"fail_rank", std::int64_t{-1}},
                              {"delay_us", 0.0}}),
             {}};
  e.data_settings.batch_size = 8;
  e.infer.batches = 10;
  e.infer.warmup = 0;
  const auto out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  EXPECT_EQ(out.samples.size(), 10u);
  EXPECT_DOUBLE_EQ(metric(out, "measured_steps"), 10);
}

runner::Experiment tiny_experiment(std::int64_t throw_at, std::int64_t nan_at) {
  runner::Experiment e = mlp_experiment();
  e.model = {"tiny_linear",
             runner::Options({{"throw_at_step", throw_at},
                              {"nan_at_step", nan_at},
                              {"crash_at_step", std::int64_t{-1}},
                              {"hang_at_step", std::int64_t{-1}},
                              {"kill_at_step", std::int64_t{-1}},
                              {"hang_in_factory", false},
                              {"fail_rank", std::int64_t{-1}},
                              {"delay_us", 0.0}}),
             {}};
  e.data = runner::PluginChoice{"tiny_data", runner::Options({{"size", std::int64_t{64}}}), {}};
  e.data_settings.batch_size = 8;
  e.train.steps = 20;
  e.train.warmup = 2;
  return e;
}

TEST_F(EngineTest, AThrowingPluginFailsTheRunAndKeepsWhatWasMeasured) {
  const auto out = run(tiny_experiment(6, -1));
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  EXPECT_EQ(out.error, kForwardFailed);
  EXPECT_EQ(out.samples.size(), 6u);
}

TEST_F(EngineTest, ANonFiniteLossMarksTheRunDiverged) {
  const auto out = run(tiny_experiment(-1, 4));
  EXPECT_EQ(out.status, runner::store::RunStatus::diverged);
  EXPECT_EQ(out.error, "loss is nan at step 4");
  ASSERT_EQ(out.samples.size(), 5u);
  EXPECT_TRUE(std::isnan(out.samples.back().loss));
}

TEST_F(EngineTest, TooFewSamplesForOneBatchIsAReadableFailure) {
  runner::Experiment e = tiny_experiment(-1, -1);
  e.data = runner::PluginChoice{"tiny_data", runner::Options({{"size", std::int64_t{4}}}), {}};
  const auto out = run(e);
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  EXPECT_EQ(out.error,
            "the data set has 4 samples, fewer than one batch (8) with drop_last = true");
}

TEST_F(EngineTest, AStopRequestEndsTheRunInterruptedBetweenSteps) {
  std::atomic<bool> stop{true};
  runner::Experiment e = tiny_experiment(-1, -1);
  runner::RunRequest request;
  request.experiment = &e;
  request.host = &host_;
  request.stop = &stop;
  const auto out = runner::execute_run(request);
  EXPECT_EQ(out.status, runner::store::RunStatus::interrupted);
  EXPECT_EQ(out.error, "interrupted before step 0");
  EXPECT_TRUE(out.samples.empty());
}

// --- data-parallel runs ([distributed], Gloo on the CPU) ---------------------------

runner::Experiment distributed(runner::Experiment e, std::int64_t world_size,
                               const std::string& hook = "allreduce") {
  e.device.threads = 1;
  e.distributed.enabled = true;
  e.distributed.world_size = world_size;
  e.distributed.timeout_s = 30;
  e.comm_hook = runner::PluginChoice{hook, runner::Options{}, {}};
  return e;
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// Sets a tiny_linear option of an experiment.
runner::Experiment with(runner::Experiment e, const std::string& key, std::int64_t value) {
  auto values = e.model.options.values();
  values[key] = value;
  e.model.options = runner::Options(values);
  return e;
}

TEST_F(EngineTest, ADistributedRunTimesTheGradientReductionAsTheCommPhase) {
  const runner::Experiment e = distributed(mlp_experiment(), 2);
  const auto out = run(e);
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  ASSERT_EQ(out.samples.size(), 65u);
  for (const auto& s : out.samples) {
    EXPECT_GT(s.phase(Phase::comm), 0) << "step " << s.step;
    EXPECT_GE(s.wall_ns, s.phase(Phase::data) + s.phase(Phase::forward) +
                             s.phase(Phase::backward) + s.phase(Phase::comm) +
                             s.phase(Phase::optimizer));
  }
  const auto* comm = summary(out, "comm");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->n, 60);
  EXPECT_EQ(metric(out, "world_size"), 2);
  EXPECT_EQ(metric(out, "comm_buckets"), 1);
  // One fp32 bucket of every parameter; a two-rank ring allreduce sends its size once.
  EXPECT_EQ(metric(out, "comm_bytes_per_step"), metric(out, "parameters") * 4);
  // samples/s counts both ranks' batches.
  const auto* step = summary(out, "step_time");
  ASSERT_NE(step, nullptr);
  EXPECT_NEAR(metric(out, "samples_per_s"), 2 * 32 / (step->mean * 1e-9),
              1e-6 * metric(out, "samples_per_s"));
  EXPECT_LT(metric(out, "loss_final"), metric(out, "loss_initial"));
}

TEST_F(EngineTest, ACompressedHookSendsHalfTheBytesOfAllreduce) {
  for (const std::string hook : {"fp16_compress", "bf16_compress"}) {
    runner::Experiment e = distributed(mlp_experiment(), 2, hook);
    e.train.steps = 10;
    const auto out = run(e);
    ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
    EXPECT_EQ(metric(out, "comm_gradient_bytes_per_step"), metric(out, "parameters") * 4) << hook;
    EXPECT_EQ(metric(out, "comm_payload_bytes_per_step"), metric(out, "parameters") * 2) << hook;
    EXPECT_EQ(metric(out, "comm_bytes_per_step"), metric(out, "parameters") * 2) << hook;
    EXPECT_EQ(metric(out, "compression_ratio"), 2.0) << hook;
  }
}

TEST_F(EngineTest, AGroupOfOneStillRunsTheHook) {
  const auto out = run(distributed(tiny_experiment(-1, -1), 1));
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  EXPECT_EQ(metric(out, "world_size"), 1);
  EXPECT_EQ(metric(out, "comm_bytes_per_step"), 0);
  ASSERT_NE(summary(out, "comm"), nullptr);
}

// Gloo writes to its peers with writev(2): once a rank has died, the next
// write to it raises SIGPIPE in the writer, which must survive to report the
// rank that died (found as a rare CI failure of the test after this one).
TEST_F(EngineTest, AWriteToADeadPeerFailsInsteadOfKillingTheRank) {
  const auto out = run(distributed(tiny_experiment(-1, -1), 2, "closed_peer"));
  EXPECT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  // Only for the run: the process's own disposition is back afterwards.
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// Gradient accumulation reduces once per optimizer step, after the last
// micro-batch (DDP's no_sync on the others), not once per micro-batch.
TEST_F(EngineTest, AccumulationReducesOncePerOptimizerStep) {
  for (const std::int64_t accumulate : {1, 3}) {
    runner::Experiment e = distributed(tiny_experiment(-1, -1), 2, "call_counting");
    e.train.accumulate = accumulate;
    const auto out = run(e);
    ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
    ASSERT_EQ(metric(out, "comm_buckets"), 1);
    // The hook's calls so far are its payload "bytes": one per step, warm-up
    // included, so the measured steps' mean is warm-up + (measured + 1) / 2.
    const double warmup = metric(out, "warmup_steps"), measured = metric(out, "measured_steps");
    EXPECT_EQ(warmup + measured, 22) << "accumulate = " << accumulate;
    EXPECT_EQ(metric(out, "comm_payload_bytes_per_step"), warmup + (measured + 1) / 2)
        << "accumulate = " << accumulate;
  }
}

TEST_F(EngineTest, AnotherRanksExceptionFailsTheRunNamingThatRank) {
  const auto out = run(distributed(with(tiny_experiment(5, -1), "fail_rank", 1), 2));
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  // As the failing rank recorded it in the run's store, with its host and pid.
  const std::string expected = "rank 1 (host " + host_name() + ", pid ";
  EXPECT_EQ(out.error.substr(0, expected.size()), expected) << out.error;
  EXPECT_NE(out.error.find(") failed: " + kForwardFailed + " (rank 0: "), std::string::npos)
      << out.error;
}

TEST_F(EngineTest, AnotherRanksCrashFailsTheRunNamingThatRankAndSignal) {
  auto e = with(with(tiny_experiment(-1, -1), "crash_at_step", 5), "fail_rank", 1);
  const auto out = run(distributed(e, 2));
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  // Its heartbeat stopped, and its exit status says why.
  const std::string expected = "lost rank 1 (host " + host_name() + ", pid ";
  EXPECT_EQ(out.error.substr(0, expected.size()), expected) << out.error;
  EXPECT_NE(out.error.find("; rank 1 was killed by signal 11 (Segmentation fault) (rank 0: "),
            std::string::npos)
      << out.error;
}

// kill -9 of a rank (or its machine lost): no rank writes why, so the
// others tell by its heartbeat, and name it with its host.
TEST_F(EngineTest, AKilledRankFailsTheRunNamingThatRankAndItsHost) {
  auto e = with(with(tiny_experiment(-1, -1), "kill_at_step", 5), "fail_rank", 2);
  const auto out = run(distributed(e, 3));
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  const std::string expected = "lost rank 2 (host " + host_name() + ", pid ";
  EXPECT_EQ(out.error.substr(0, expected.size()), expected) << out.error;
  EXPECT_NE(out.error.find("no heartbeat for"), std::string::npos) << out.error;
  EXPECT_EQ(out.error.find("lost rank 1"), std::string::npos) << out.error;
}

TEST_F(EngineTest, EveryRanksStepTimesGiveTheStragglerFigures) {
  const auto out = run(distributed(tiny_experiment(-1, -1), 3));
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  EXPECT_EQ(metric(out, "ranks_reporting_times"), 3);
  const auto* max = summary(out, "rank_step_max");
  const auto* median = summary(out, "rank_step_median");
  const auto* ratio = summary(out, "straggler_ratio");
  ASSERT_NE(max, nullptr);
  ASSERT_NE(median, nullptr);
  ASSERT_NE(ratio, nullptr);
  EXPECT_EQ(max->n, metric(out, "measured_steps"));
  EXPECT_GE(max->min, median->min);
  EXPECT_GE(ratio->min, 1.0);
  const double slowest = metric(out, "slowest_rank");
  EXPECT_TRUE(slowest == 0 || slowest == 1 || slowest == 2) << slowest;
  // Rank 0's own step times are among them: the median is never above the max of rank 0's
  // and the slowest rank's.
  const auto* step = summary(out, "step_time");
  ASSERT_NE(step, nullptr);
  EXPECT_GE(max->max, step->min);
}

TEST_F(EngineTest, CommTimeIsSplitIntoExposedAndTotal) {
  const auto out = run(distributed(mlp_experiment(), 2));
  ASSERT_EQ(out.status, runner::store::RunStatus::finished) << out.error;
  const auto* comm = summary(out, "comm");
  const auto* total = summary(out, "comm_total");
  ASSERT_NE(comm, nullptr);
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(total->n, comm->n);
  EXPECT_GT(total->p50, 0.0);
  EXPECT_EQ(metric(out, "compression_ratio"), 1.0);
}

TEST_F(EngineTest, RankZerosOwnFailureIsReportedAsItself) {
  const auto out = run(distributed(with(tiny_experiment(5, -1), "fail_rank", 0), 2));
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  EXPECT_EQ(out.error, kForwardFailed);
  EXPECT_EQ(out.samples.size(), 5u);
}

TEST_F(EngineTest, AHookReturningTheWrongSizeFailsTheRun) {
  const auto out = run(distributed(tiny_experiment(-1, -1), 1, "truncating"));
  EXPECT_EQ(out.status, runner::store::RunStatus::failed);
  EXPECT_EQ(out.error, "the comm hook returned a tensor of 5 elements for bucket 0 of 10 elements");
}

TEST(ResolveDevice, CpuIsAlwaysCpuAndCudaWithoutDeviceIsAnInputError) {
  EXPECT_EQ(runner::resolve_device("cpu"), "cpu");
  const std::string automatic = runner::resolve_device("auto");
  EXPECT_TRUE(automatic == "cpu" || automatic == "cuda");
  if (automatic == "cpu") {
    EXPECT_THROW_MSG((void)runner::resolve_device("cuda"), runner::Error,
                     "device.type is \"cuda\" but no CUDA device is available");
  }
}

}  // namespace
