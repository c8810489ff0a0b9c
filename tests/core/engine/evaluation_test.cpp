// Held-out evaluation, weights saved at the end of a run and read at the
// start of another, through real plugin libraries.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <runner/sdk.hpp>

#include "runner/common/sha256.hpp"
#include "engine_fixture.hpp"
#include "runner/engine/engine.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

runner::Experiment mlp(std::int64_t hidden = 32) {
  runner::Experiment e = runner::test::mlp_sgd("evaluation-test", 3, hidden);
  e.train.steps = 55;
  e.train.warmup = 5;
  return e;
}

class EvaluationTest : public runner::test::EngineFixture {
 protected:
  static runner::Experiment starting_from(runner::Experiment e, const fs::path& weights) {
    e.model_settings.init_from = weights;
    e.model_settings.init_from_sha256 = runner::sha256_file_hex(weights);
    return e;
  }
  runner::test::TempDir tmp_{"runner_evaluation"};
};

TEST_F(EvaluationTest, EveryNStepsAndAtTheEndOutsideTheTimedSteps) {
  runner::Experiment e = mlp();
  e.eval.enabled = true;
  e.eval.every = 20;
  e.eval.batches = 4;
  const runner::RunOutcome o = run(e);
  ASSERT_EQ(o.status, runner::store::RunStatus::finished) << o.error;
  EXPECT_EQ(o.samples.size(), 60u);  // evaluations are not steps
  std::map<std::int64_t, std::map<std::string, double>> by_step;
  for (const auto& v : o.evaluations) by_step[v.step][v.metric] = v.value;
  ASSERT_EQ(by_step.size(), 3u);  // after 20, 40 and 60 steps; 60 is also the end
  const std::vector<std::int64_t> steps{20, 40, 60};
  std::size_t i = 0;
  for (const auto& [step, values] : by_step) {
    EXPECT_EQ(step, steps[i++]);
    ASSERT_EQ(values.size(), 2u);
    EXPECT_GE(values.at("accuracy"), 0.0);
    EXPECT_LE(values.at("accuracy"), 1.0);
    EXPECT_GT(values.at("loss"), 0.0);
  }
  // The model learns the teacher, and the held-out split shows it.
  EXPECT_LT(by_step[60]["loss"], by_step[20]["loss"]);
  EXPECT_GT(by_step[60]["accuracy"], 0.5);
  EXPECT_EQ(metric(o, "eval_loss"), by_step[60]["loss"]);
  EXPECT_EQ(metric(o, "eval_accuracy"), by_step[60]["accuracy"]);

  e.eval.every = 0;  // only at the end
  const runner::RunOutcome end_only = run(e);
  ASSERT_EQ(end_only.evaluations.size(), 2u);
  EXPECT_EQ(end_only.evaluations[0].step, 60);
  // Same seed, same steps: evaluating in between changes nothing the model computes.
  EXPECT_EQ(metric(end_only, "eval_loss"), metric(o, "eval_loss"));
}

TEST_F(EvaluationTest, TheEvalSplitIsHeldOutAndTheSameEveryTime) {
  runner::Experiment e = mlp();
  runner::LoaderContext train, eval;
  eval.split = runner::Split::eval;
  auto a = host_.make_loader("synthetic", e.data->options, train);
  auto b = host_.make_loader("synthetic", e.data->options, eval);
  auto c = host_.make_loader("synthetic", e.data->options, eval);
  const auto all = [](runner::Loader& l) {
    std::vector<std::int64_t> indices(static_cast<std::size_t>(l.size()));
    for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<std::int64_t>(i);
    return l.get_batch(indices);
  };
  const runner::Batch x = all(*a), y = all(*b), z = all(*c);
  EXPECT_TRUE(y.inputs.equal(z.inputs));
  EXPECT_TRUE(y.targets.equal(z.targets));
  // No held-out sample is a training sample.
  const torch::Tensor distances = torch::cdist(y.inputs, x.inputs);
  EXPECT_GT(distances.min().item<double>(), 1e-3);
}

TEST_F(EvaluationTest, SavedWeightsStartAnotherRunWhereTheFirstEnded) {
  runner::Experiment trained = mlp();
  trained.eval.enabled = true;
  trained.train.save_to = (tmp_.path() / "w-{repeat}.safetensors").string();
  const runner::RunOutcome first = run(trained);
  ASSERT_EQ(first.status, runner::store::RunStatus::finished) << first.error;
  const fs::path saved = tmp_.path() / "w-0.safetensors";
  ASSERT_EQ(first.files.size(), 1u);
  EXPECT_EQ(first.files[0].role, "save_to");
  EXPECT_EQ(first.files[0].path, saved.string());
  EXPECT_EQ(first.files[0].sha256, runner::sha256_file_hex(saved));
  EXPECT_EQ(first.files[0].bytes, static_cast<std::int64_t>(fs::file_size(saved)));

  // Inference from those weights evaluates to what the training run ended with.
  runner::Experiment infer = starting_from(mlp(), saved);
  infer.kind = runner::RunKind::infer;
  infer.optimizer.reset();
  infer.infer.batches = 3;
  infer.infer.warmup = 1;
  infer.eval.enabled = true;
  runner::check_before_runs(infer, host_, "cpu");
  const runner::RunOutcome second = run(infer);
  ASSERT_EQ(second.status, runner::store::RunStatus::finished) << second.error;
  ASSERT_EQ(second.files.size(), 1u);
  EXPECT_EQ(second.files[0].role, "init_from");
  EXPECT_EQ(second.files[0].sha256, first.files[0].sha256);
  EXPECT_EQ(metric(second, "init_skipped"), 0.0);
  EXPECT_NEAR(metric(second, "eval_loss"), metric(first, "eval_loss"), 1e-6);
  EXPECT_EQ(metric(second, "eval_accuracy"), metric(first, "eval_accuracy"));
}

TEST_F(EvaluationTest, WeightsThatDoNotFitAreRefusedBeforeTheRunAndFailItIfTheyChange) {
  runner::Experiment small = mlp(16);
  small.train.steps = 1;
  small.train.warmup = 0;
  small.train.save_to = (tmp_.path() / "small.safetensors").string();
  ASSERT_EQ(run(small).status, runner::store::RunStatus::finished);
  const fs::path file = tmp_.path() / "small.safetensors";
  const runner::Experiment wide = starting_from(mlp(32), file);
  EXPECT_THROW_MSG(runner::check_before_runs(wide, host_, "cpu"), runner::Error,
                   "the weights in '" + file.string() +
                       "' do not match the model: wrong shape: net.0.bias [16] in the file, [32] "
                       "in the model, net.0.weight [16, 16] in the file, [32, 16] in the model, "
                       "net.2.weight [4, 16] in the file, [4, 32] in the model");
  // A file replaced after validation is not the trial's file any more.
  runner::Experiment same = starting_from(mlp(16), file);
  runner::check_before_runs(same, host_, "cpu");
  std::ofstream(file, std::ios::binary | std::ios::app) << "x";
  const runner::RunOutcome o = run(same);
  EXPECT_EQ(o.status, runner::store::RunStatus::failed);
  EXPECT_EQ(o.error.rfind("'" + file.string() + "' changed since the experiment was validated", 0),
            0u)
      << o.error;
}

}  // namespace
