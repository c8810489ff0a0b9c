// The training-recipe keys: [train] precision, accumulate, clip_grad_norm,
// [infer] precision, [model] channels_last, [schedule], and the [device]
// math settings. Values, identity (earlier trials keep their hashes) and the
// errors of each, at file:line:col.
#include "experiment_fixture.hpp"

namespace runner {
namespace {

class RecipeKeysTest : public test::ExperimentFixture {};

TEST_F(RecipeKeysTest, DefaultsChangeNothingInTheIdentity) {
  const Experiment plain = load(test::kMinimal);
  EXPECT_EQ(plain.train.precision, "fp32");
  EXPECT_EQ(plain.train.accumulate, 1);
  EXPECT_EQ(plain.train.clip_grad_norm, 0.0);
  EXPECT_FALSE(plain.schedule.enabled);
  EXPECT_FALSE(plain.model_settings.channels_last);
  EXPECT_FALSE(plain.device.cudnn_benchmark.has_value());
  // Written out at their defaults, the keys give the trial the hash it had.
  const Experiment spelled = load(
      "[model]\nplugin = \"mlp\"\nchannels_last = false\n" + test::kData + test::kOptimizer +
      "[train]\nprecision = \"fp32\"\naccumulate = 1\n");
  EXPECT_EQ(spelled.config_hash(), plain.config_hash());
  EXPECT_EQ(plain.resolved_json().find("precision"), std::string::npos);
}

TEST_F(RecipeKeysTest, EachRecipeKeyJoinsTheIdentity) {
  const std::string base = test::kMinimal;
  const std::string plain = load(base).config_hash();
  std::vector<std::string> hashes{plain};
  for (const std::string& extra :
       {std::string("[train]\nprecision = \"amp_bf16\"\n"), std::string("[train]\nprecision = \"bf16\"\n"),
        std::string("[train]\naccumulate = 4\n"), std::string("[train]\nclip_grad_norm = 1.0\n"),
        std::string("[schedule]\ntype = \"cosine\"\n"),
        std::string("[schedule]\ntype = \"cosine\"\nmin_lr = 0.001\n"),
        std::string("[device]\ndeterministic = true\n"),
        std::string("[device]\nfloat32_matmul_precision = \"medium\"\n")}) {
    hashes.push_back(load(base + extra).config_hash());
    for (std::size_t i = 0; i + 1 < hashes.size(); ++i)
      EXPECT_NE(hashes[i], hashes.back()) << extra;
  }
  const Experiment cl = load("[model]\nplugin = \"mlp\"\nchannels_last = true\n" + test::kData +
                             test::kOptimizer);
  EXPECT_TRUE(cl.model_settings.channels_last);
  EXPECT_NE(cl.config_hash(), plain);
}

TEST_F(RecipeKeysTest, ValuesReachTheExperiment) {
  const Experiment e = load(test::kMinimal +
                            "[train]\nsteps = 20\nwarmup = 2\nprecision = \"amp_fp16\"\n"
                            "accumulate = 3\nclip_grad_norm = 0.5\n"
                            "[schedule]\ntype = \"step\"\nwarmup_steps = 4\nstep_size = 5\n"
                            "gamma = 0.5\n");
  EXPECT_EQ(e.train.precision, "amp_fp16");
  EXPECT_EQ(e.precision(), "amp_fp16");
  EXPECT_EQ(e.train.accumulate, 3);
  EXPECT_EQ(e.train.clip_grad_norm, 0.5);
  EXPECT_TRUE(e.schedule.enabled);
  EXPECT_EQ(e.schedule.type, "step");
  EXPECT_EQ(e.schedule.warmup_steps, 4);
  EXPECT_EQ(e.schedule.step_size, 5);
  EXPECT_EQ(e.schedule.gamma, 0.5);
  EXPECT_EQ(e.total_train_steps(), 22);
  EXPECT_EQ(e.where_of("train.precision").str(), file() + ":11:13");
  const Experiment infer = load("[experiment]\nkind = \"infer\"\n" + test::kModel +
                                "[infer]\nprecision = \"bf16\"\n");
  EXPECT_EQ(infer.precision(), "bf16");
}

TEST_F(RecipeKeysTest, BadValuesAreRefusedWhereTheyAreWritten) {
  const std::string head = test::kMinimal + "[train]\n";  // [train] is line 8
  EXPECT_THROW_MSG(load(head + "accumulate = 0\n"), Error,
                   at(9, 14) + "'train.accumulate' must be between 1 and 4096, found 0");
  EXPECT_THROW_MSG(load(head + "clip_grad_norm = 0\n"), Error,
                   at(9, 18) + "'train.clip_grad_norm' must be > 0, found 0");
  EXPECT_THROW_MSG(load(head + "clip_grad_norm = -1.5\n"), Error,
                   at(9, 18) + "'train.clip_grad_norm' must be > 0, found -1.5");
  EXPECT_THROW_MSG(load(head + "precision = \"fp16\"\n"), Error,
                   at(9, 13) + "'train.precision' must be one of \"fp32\", \"bf16\", \"amp_bf16\", "
                               "\"amp_fp16\", found \"fp16\"");
}

TEST_F(RecipeKeysTest, ScheduleKeysMustFitTheType) {
  const std::string head = test::kMinimal + "[schedule]\n";  // [schedule] is line 8
  Error missing = error_of(head + "type = \"step\"\n");
  EXPECT_EQ(std::string(missing.what()),
            at(9, 8) + "schedule type \"step\" needs 'schedule.step_size'");
  EXPECT_THROW_MSG(load(head + "type = \"cosine\"\nstep_size = 3\n"), Error,
                   at(10, 13) + "'schedule.step_size' is used by type = \"step\", but type = "
                               "\"cosine\"");
  EXPECT_THROW_MSG(load(head + "type = \"one_cycle\"\nwarmup_steps = 5\n"), Error,
                   at(10, 16) + "'schedule.warmup_steps' does not apply to type = \"one_cycle\", "
                               "which warms up by itself");
  // train.steps 100 + warmup 10 = 110 optimizer steps.
  EXPECT_THROW_MSG(load(head + "type = \"cosine\"\nwarmup_steps = 110\n"), Error,
                   at(10, 16) + "'schedule.warmup_steps' is 110, but the run takes 110 optimizer "
                               "steps (train.warmup + train.steps)");
  EXPECT_THROW_MSG(load(head + "type = \"one_cycle\"\nbase_momentum = 0.96\n"), Error,
                   at(10, 17) + "'schedule.base_momentum' (0.96) is above 'schedule.max_momentum' "
                               "(0.95)");
  EXPECT_THROW_MSG(load(head + "warmup_start_factor = 0\n"), Error,
                   at(9, 23) + "'schedule.warmup_start_factor' must be > 0, found 0");
  EXPECT_THROW_MSG(load("[experiment]\nkind = \"infer\"\n" + test::kModel +
                        "[schedule]\ntype = \"cosine\"\n"),
                   Error,
                   at(5, 1) + "section [schedule] is only used by train experiments");
}

TEST_F(RecipeKeysTest, CudaSettingsOnACpuRunAreRefused) {
  for (const std::string key : {"cudnn_benchmark", "tf32_matmul", "tf32_conv"}) {
    Error e = error_of(test::kMinimal + "[device]\ntype = \"cpu\"\n" + key + " = true\n");
    EXPECT_EQ(std::string(e.what()),
              at(10, static_cast<int>(key.size()) + 4) + "'device." + key +
                  "' is a CUDA setting, but device.type = \"cpu\"");
    EXPECT_EQ(e.hint(), "remove it, or run on a GPU with device.type = \"cuda\" (or \"auto\")");
  }
  // Settings that also mean something on the CPU are accepted there.
  const Experiment e = load(test::kMinimal +
                            "[device]\ndeterministic = true\nfloat32_matmul_precision = \"high\"\n");
  EXPECT_EQ(e.device.deterministic, true);
  EXPECT_EQ(e.device.float32_matmul_precision, "high");
  // device.type = "auto" may find a GPU: the run's preflight decides.
  EXPECT_EQ(load(test::kMinimal + "[device]\ntype = \"auto\"\ncudnn_benchmark = true\n")
                .device.cudnn_benchmark,
            true);
}

}  // namespace
}  // namespace runner
