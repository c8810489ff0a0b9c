// Loading weights by name: a file saved from Python computes the same output
// in runner; runner's own files round-trip; a mismatch is one error listing
// every missing, unexpected and mis-shaped name, and changes nothing.
#include "runner/weights/state.hpp"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <unistd.h>

#include "runner/common/error.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;

torch::nn::Sequential small(std::int64_t width = 4) {
  return torch::nn::Sequential(torch::nn::Linear(3, width), torch::nn::BatchNorm1d(width));
}

class StateTest : public ::testing::Test {
 protected:
  runner::test::TempDir tmp_{"runner_state"};
  const fs::path& dir_ = tmp_.path();
};

TEST_F(StateTest, WeightsSavedFromPythonComputeTheSameOutput) {
  RUNNER_REQUIRE_ORACLE("torch,safetensors");
  const fs::path path = dir_ / "python.safetensors";
  const auto r = runner::test::run_oracle("state_files.py", {path.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  auto state = runner::weights::read_safetensors_tensors(path);
  auto model = small();
  const auto load = runner::weights::load_state(*model, state, /*strict=*/false, path.string());
  EXPECT_EQ(load.loaded.size(), 7u);
  EXPECT_TRUE(load.missing.empty());
  EXPECT_EQ(load.unexpected, (std::vector<std::string>{"expected_output", "input"}));
  EXPECT_EQ(model[1]->as<torch::nn::BatchNorm1d>()->num_batches_tracked.item<std::int64_t>(), 0);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor out = model->forward(state.at("input"));
  EXPECT_TRUE(out.allclose(state.at("expected_output"), 1e-5, 1e-6))
      << (out - state.at("expected_output")).abs().max().item<double>();
  // strict = true refuses the extra names, naming the file.
  EXPECT_THROW_MSG((void)runner::weights::load_state(*model, state, true, path.string()),
                   runner::Error,
                   "the weights in '" + path.string() +
                       "' do not match the model: unexpected expected_output, input");
}

TEST_F(StateTest, RunnersOwnFilesRoundTrip) {
  auto saved = small();
  {
    torch::NoGradGuard no_grad;
    saved[1]->as<torch::nn::BatchNorm1d>()->running_mean.fill_(0.5);
  }
  const fs::path path = dir_ / "model.safetensors";
  runner::weights::save_safetensors(path, *saved, {{"producer", "runner"}});
  auto loaded = small();
  const auto load = runner::weights::load_state(
      *loaded, runner::weights::read_safetensors_tensors(path), true, path.string());
  EXPECT_EQ(load.loaded.size(), 7u);
  for (const auto& p : saved->named_parameters())
    EXPECT_TRUE(p.value().equal(loaded->named_parameters()[p.key()])) << p.key();
  for (const auto& b : saved->named_buffers())
    EXPECT_TRUE(b.value().equal(loaded->named_buffers()[b.key()])) << b.key();
}

TEST_F(StateTest, AMismatchListsEveryNameAndLoadsNothing) {
  auto other = torch::nn::Sequential(torch::nn::Linear(3, 5));  // 0.weight [5, 3], 0.bias [5]
  std::map<std::string, torch::Tensor> state;
  for (const auto& p : other->named_parameters()) state[p.key()] = p.value().detach();
  state["head.weight"] = torch::zeros({2});
  auto model = small();
  const torch::Tensor before = model[0]->as<torch::nn::Linear>()->weight.clone();
  EXPECT_THROW_MSG(
      (void)runner::weights::load_state(*model, state, true, "other.safetensors"), runner::Error,
      "the weights in 'other.safetensors' do not match the model: missing 1.bias, "
      "1.num_batches_tracked, 1.running_mean, 1.running_var, 1.weight; unexpected head.weight; "
      "wrong shape: 0.bias [5] in the file, [4] in the model, 0.weight [5, 3] in the file, [4, 3] "
      "in the model");
  // strict = false forgives names, never shapes.
  EXPECT_THROW_MSG(
      (void)runner::weights::load_state(*model, state, false, "other.safetensors"), runner::Error,
      "the weights in 'other.safetensors' do not match the model: wrong shape: 0.bias [5] in the "
      "file, [4] in the model, 0.weight [5, 3] in the file, [4, 3] in the model");
  EXPECT_TRUE(model[0]->as<torch::nn::Linear>()->weight.equal(before));
}

TEST_F(StateTest, ATiedAliasIsSavedAsACopyAndAcceptedOnLoad) {
  // "lm_head.weight" is "0.weight" under another name, as a tied LM head is.
  const std::map<std::string, std::string> tied{{"lm_head.weight", "0.weight"}};
  auto saved = small();
  const fs::path path = dir_ / "tied.safetensors";
  runner::weights::save_safetensors(path, *saved, {}, tied);
  auto state = runner::weights::read_safetensors_tensors(path);
  ASSERT_EQ(state.count("lm_head.weight"), 1u);
  EXPECT_TRUE(state.at("lm_head.weight").equal(state.at("0.weight")));

  // Both names (Python's state_dict of a tied model): the alias is not unexpected.
  auto both = small();
  const auto load = runner::weights::load_state(*both, state, true, path.string(), tied);
  EXPECT_EQ(load.loaded.size(), 7u);
  EXPECT_TRUE(load.unexpected.empty());
  // Only the alias: it sets the parameter.
  state.erase("0.weight");
  auto alias_only = small();
  (void)runner::weights::load_state(*alias_only, state, true, path.string(), tied);
  EXPECT_TRUE(alias_only[0]->as<torch::nn::Linear>()->weight.equal(
      saved[0]->as<torch::nn::Linear>()->weight));
  // Without the tie the alias is an unexpected name.
  EXPECT_THROW_MSG((void)runner::weights::load_state(*small(), state, true, "t"), runner::Error,
                   "the weights in 't' do not match the model: missing 0.weight; unexpected "
                   "lm_head.weight");
}

}  // namespace
