// The `checkpoint` option of the built-in models: checkpointed training is
// plain training (losses, gradients, parameters after SGD steps, BatchNorm's
// running statistics, the random stream after the step), and it keeps less
// memory at its peak (the CPU tracker, runner/training/memory.hpp). The
// option layer refuses bad values with the usual messages, and trials that
// leave the options at their defaults keep their identity.
//
// Tolerance: none. Both models run the same kernels on the same values (the
// recomputation sees the forward's random state), on one thread, so the
// comparisons are exact (torch::equal).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <runner/sdk.hpp>

#include "core/experiment/experiment_fixture.hpp"
#include "runner/host/host.hpp"
#include "runner/training/memory.hpp"
#include "support/module_state.hpp"

namespace {

namespace fs = std::filesystem;
using Values = std::map<std::string, runner::OptionValue>;

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

// The tracker must wrap the allocator before the process's first tensor.
class InstallTracker : public ::testing::Environment {
 public:
  void SetUp() override { runner::training::cpu_memory::install(); }
};
const auto* const kTracker = ::testing::AddGlobalTestEnvironment(new InstallTracker);

runner::ModelContext images(std::int64_t side, std::int64_t classes) {
  runner::ModelContext context;
  context.input_shape = {3, side, side};
  context.num_classes = classes;
  return context;
}

runner::ModelContext tokens(std::int64_t seq_len, std::int64_t vocab) {
  runner::ModelContext context;
  context.input_shape = {seq_len};
  context.num_classes = vocab;
  return context;
}

using runner::test::state_of;

/// What two SGD steps leave behind.
struct Outcome {
  std::vector<double> losses;
  std::vector<std::map<std::string, torch::Tensor>> grads;  // per step
  std::map<std::string, torch::Tensor> state;               // parameters and buffers after
  torch::Tensor next_draw;                                  // the random stream after
};

Outcome train(runner::Model& model, const runner::Batch& batch) {
  torch::nn::Module& module = model.module();
  module.train();
  torch::optim::SGD sgd(module.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  Outcome out;
  torch::manual_seed(11);
  for (int step = 0; step < 2; ++step) {
    sgd.zero_grad();
    const torch::Tensor loss = model.loss(model.forward(batch), batch);
    loss.backward();
    out.losses.push_back(loss.item<double>());
    std::map<std::string, torch::Tensor> grads;
    for (const auto& p : module.named_parameters())
      if (p.value().grad().defined()) grads[p.key()] = p.value().grad().clone();
    out.grads.push_back(std::move(grads));
    sgd.step();
  }
  for (const auto& [name, tensor] : state_of(module)) out.state[name] = tensor.clone();
  out.next_draw = torch::rand({16});
  return out;
}

void expect_same(const std::map<std::string, torch::Tensor>& actual,
                 const std::map<std::string, torch::Tensor>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, tensor] : expected) {
    const auto found = actual.find(name);
    ASSERT_NE(found, actual.end()) << what << ": no " << name;
    EXPECT_TRUE(torch::equal(found->second, tensor))
        << what << " " << name << ": max |difference| "
        << (found->second - tensor).abs().max().item<double>();
  }
}

class CheckpointedModels : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    host_.load(kBuiltins);
  }

  std::unique_ptr<runner::Model> make(const std::string& plugin, Values options,
                                      const runner::ModelContext& context) {
    torch::manual_seed(0);
    return host_.make_model(plugin, runner::Options(std::move(options)), context);
  }

  /// Trains `plugin` plainly and with each checkpoint mode from the same
  /// weights on the same batch, and expects the same outcome.
  void expect_checkpointing_changes_nothing(const std::string& plugin, const Values& options,
                                            const runner::ModelContext& context,
                                            std::int64_t every) {
    auto plain = make(plugin, options, context);
    torch::manual_seed(5);
    const runner::Batch batch = plain->example_batch(4, torch::kCPU);
    std::map<std::string, torch::Tensor> initial;
    for (const auto& [name, tensor] : state_of(plain->module())) initial[name] = tensor.clone();
    const Outcome expected = train(*plain, batch);
    for (const std::string mode : {"blocks", "every_k"}) {
      Values with = options;
      with["checkpoint"] = mode;
      with["checkpoint_every"] = every;
      auto model = make(plugin, with, context);
      {
        torch::NoGradGuard no_grad;
        for (auto& [name, tensor] : state_of(model->module())) tensor.copy_(initial.at(name));
      }
      const Outcome got = train(*model, batch);
      SCOPED_TRACE(plugin + " checkpoint = " + mode);
      EXPECT_EQ(got.losses, expected.losses);
      for (std::size_t step = 0; step < expected.grads.size(); ++step)
        expect_same(got.grads[step], expected.grads[step],
                    "gradient at step " + std::to_string(step + 1));
      expect_same(got.state, expected.state, "state after 2 SGD steps");
      EXPECT_TRUE(torch::equal(got.next_draw, expected.next_draw)) << "random stream after";
    }
  }

  runner::PluginHost host_;
};

TEST_F(CheckpointedModels, ResNetTrainsAsWithoutWithBatchNormStatisticsUpdatedOnce) {
  // Eight basic blocks; every_k with k = 3 checkpoints blocks 0, 3 and 6.
  expect_checkpointing_changes_nothing(
      "resnet", {{"depth", std::int64_t{18}}, {"stem", std::string("cifar")}}, images(16, 10), 3);
}

TEST_F(CheckpointedModels, VitWithDropoutTrainsAsWithout) {
  expect_checkpointing_changes_nothing("vit",
                                       {{"config", std::string("ti")},
                                        {"patch_size", std::int64_t{8}},
                                        {"dropout", 0.1},
                                        {"attention_dropout", 0.1}},
                                       images(32, 10), 2);
}

TEST_F(CheckpointedModels, Gpt2WithDropoutTrainsAsWithout) {
  expect_checkpointing_changes_nothing("transformer_lm",
                                       {{"flavour", std::string("gpt2")},
                                        {"width", std::int64_t{32}},
                                        {"depth", std::int64_t{4}},
                                        {"heads", std::int64_t{4}},
                                        {"dropout", 0.1}},
                                       tokens(16, 50), 2);
}

TEST_F(CheckpointedModels, LlamaWithDropoutTrainsAsWithout) {
  expect_checkpointing_changes_nothing("transformer_lm",
                                       {{"flavour", std::string("llama")},
                                        {"width", std::int64_t{32}},
                                        {"depth", std::int64_t{4}},
                                        {"heads", std::int64_t{4}},
                                        {"kv_heads", std::int64_t{2}},
                                        {"multiple_of", std::int64_t{16}},
                                        {"dropout", 0.1}},
                                       tokens(16, 50), 3);
}

/// Bytes the tracker saw at most during one training step, above what was
/// live before it (weights, gradients from the step before, the batch).
std::int64_t step_peak(runner::Model& model, const runner::Batch& batch) {
  namespace mem = runner::training::cpu_memory;
  model.module().train();
  model.module().zero_grad(/*set_to_none=*/false);
  // A first step allocates the gradients, so both modes start equal.
  model.loss(model.forward(batch), batch).backward();
  const std::int64_t before = mem::current_bytes();
  mem::reset_peak();
  model.loss(model.forward(batch), batch).backward();
  return mem::peak_bytes() - before;
}

TEST_F(CheckpointedModels, CheckpointingLowersThePeakOfATrainingStep) {
  ASSERT_TRUE(runner::training::cpu_memory::installed());
  // gpt2, 8 blocks of width w = 64 over N = 16 x 128 tokens, a vocabulary of
  // 64 so that the logits (N x 64) weigh about one block input (N x w).
  // Without checkpointing a block keeps about 16 N x w floats for backward
  // (its input and both norms' outputs, q/k/v and the attention output, its
  // reshaped copy, 4w-wide MLP input and GELU output), so the 8 blocks keep
  // ~128 N x w. With every block checkpointed it keeps its input (8 N x w in
  // all) and, in backward, one block's ~16 N x w at a time plus the
  // gradients flowing through it: ~30 N x w, a quarter. With every second
  // block (every_k, k = 2): 4 x 16 + 4 + 16 = ~84 N x w, two thirds. The
  // bounds below leave room for what this count omits (logits, loss,
  // gradient buffers, attention's statistics).
  Values options{{"flavour", std::string("gpt2")}, {"width", std::int64_t{64}},
                 {"depth", std::int64_t{8}},       {"heads", std::int64_t{4}}};
  const runner::ModelContext context = tokens(128, 64);
  std::map<std::string, std::int64_t> peak;
  for (const std::string mode : {"none", "every_k", "blocks"}) {
    Values with = options;
    with["checkpoint"] = mode;
    auto model = make("transformer_lm", with, context);
    torch::manual_seed(5);
    const runner::Batch batch = model->example_batch(16, torch::kCPU);
    peak[mode] = step_peak(*model, batch);
  }
  const double none = static_cast<double>(peak["none"]);
  RecordProperty("peak_none_bytes", std::to_string(peak["none"]));
  RecordProperty("peak_every_2_bytes", std::to_string(peak["every_k"]));
  RecordProperty("peak_blocks_bytes", std::to_string(peak["blocks"]));
  std::cout << "step peak above the weights: none " << peak["none"] << " B, every_k(2) "
            << peak["every_k"] << " B, blocks " << peak["blocks"] << " B\n";
  EXPECT_LT(static_cast<double>(peak["blocks"]), 0.5 * none);
  EXPECT_LT(static_cast<double>(peak["every_k"]), 0.85 * none);
  EXPECT_GT(peak["every_k"], peak["blocks"]);
}

TEST_F(CheckpointedModels, InferenceIgnoresTheOption) {
  // Under no-grad nothing is recomputed or kept: the same logits, one pass.
  Values options{{"flavour", std::string("gpt2")}, {"width", std::int64_t{32}},
                 {"depth", std::int64_t{2}},       {"heads", std::int64_t{4}}};
  auto plain = make("transformer_lm", options, tokens(16, 50));
  options["checkpoint"] = std::string("blocks");
  auto checkpointed = make("transformer_lm", options, tokens(16, 50));
  const runner::Batch batch = plain->example_batch(2, torch::kCPU);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = checkpointed->forward(batch);
  EXPECT_EQ(logits.grad_fn(), nullptr);
  EXPECT_TRUE(torch::equal(logits, plain->forward(batch)));
}

// The options through an experiment file, against the built-in plugins.
class CheckpointOptions : public runner::test::ExperimentFixture {
 protected:
  void SetUp() override {
    ExperimentFixture::SetUp();
    host_.load(kBuiltins);
  }
  std::string experiment(const std::string& model_lines) const {
    return "[model]\nplugin = \"resnet\"\n" + model_lines +
           "[data]\nplugin = \"synthetic\"\nshape = [3, 8, 8]\nclasses = 10\n"
           "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n";
  }
  runner::PluginHost host_;
};

TEST_F(CheckpointOptions, BadValuesAreRefusedWhereTheyAreWritten) {
  EXPECT_EQ(std::string(error_of(experiment("checkpoint_every = 0\n"), &host_).what()),
            at(3, 20) + "'model.checkpoint_every' must be between 1 and 1024, found 0");
  EXPECT_EQ(std::string(error_of(experiment("checkpoint = \"all\"\n"), &host_).what()),
            at(3, 14) +
                "'model.checkpoint' must be one of \"none\", \"blocks\", \"every_k\", found \"all\"");
}

TEST_F(CheckpointOptions, TrialsAtTheDefaultsKeepTheirIdentity) {
  const std::string before = runner::load_experiment(write(experiment("")), host_).config_hash();
  EXPECT_EQ(runner::load_experiment(
                write(experiment("checkpoint = \"none\"\ncheckpoint_every = 2\n")), host_)
                .config_hash(),
            before);
  EXPECT_NE(
      runner::load_experiment(write(experiment("checkpoint = \"blocks\"\n")), host_).config_hash(),
      before);
  EXPECT_NE(runner::load_experiment(
                write(experiment("checkpoint = \"every_k\"\ncheckpoint_every = 4\n")), host_)
                .config_hash(),
            before);
}

}  // namespace
