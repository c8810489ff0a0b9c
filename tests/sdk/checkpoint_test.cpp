// runner::checkpoint on small blocks: the same outputs and gradients as
// running the block plainly, the block run again in backward (and only
// then), the random stream and autocast of the forward pass in the
// recomputation, BatchNorm statistics updated once when the module is given.
//
// Tolerance: none. The recomputation runs the same kernels on the same
// values in the same order as the plain pass, on one thread, so every
// comparison is exact (torch::equal).
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <runner/checkpoint.hpp>

#include <map>
#include <memory>
#include <string>

namespace {

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    torch::manual_seed(0);
  }
};

torch::nn::Sequential mlp() {
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::GELU(),
                               torch::nn::Linear(16, 8));
}

std::map<std::string, torch::Tensor> grads_of(torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& p : module.named_parameters()) grads[p.key()] = p.value().grad().clone();
  return grads;
}

void expect_equal(const std::map<std::string, torch::Tensor>& actual,
                  const std::map<std::string, torch::Tensor>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(actual.at(name).defined()) << what << " " << name;
    EXPECT_TRUE(torch::equal(actual.at(name), tensor))
        << what << " " << name << ": max |difference| "
        << (actual.at(name) - tensor).abs().max().item<double>();
  }
}

/// The sequential's forward, counting its calls.
runner::CheckpointBlock counted(const torch::nn::Sequential& block, int& calls) {
  return [module = block.ptr(), &calls](const torch::Tensor& x) {
    ++calls;
    return module->forward(x);
  };
}

TEST_F(Checkpoint, GivesThePlainOutputAndGradientsAndRunsTheBlockAgainOnlyInBackward) {
  torch::nn::Sequential block = mlp();
  const torch::Tensor x = torch::randn({4, 8});

  const torch::Tensor plain_in = x.clone().requires_grad_();
  const torch::Tensor plain = block->forward(plain_in);
  plain.pow(2).sum().backward();
  const auto plain_grads = grads_of(*block);
  block->zero_grad();

  int calls = 0;
  const torch::Tensor in = x.clone().requires_grad_();
  const torch::Tensor out = runner::checkpoint(counted(block, calls), in);
  EXPECT_EQ(calls, 1);
  ASSERT_NE(out.grad_fn(), nullptr);
  EXPECT_NE(out.grad_fn()->name().find("CheckpointFunction"), std::string::npos)
      << out.grad_fn()->name();
  EXPECT_TRUE(torch::equal(out, plain));
  out.pow(2).sum().backward();
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(torch::equal(in.grad(), plain_in.grad()));
  expect_equal(grads_of(*block), plain_grads, "parameter gradient");
}

TEST_F(Checkpoint, ParameterGradientsAccumulateAsInPlainTraining) {
  // Two backward passes without zeroing: .grad holds the sum, as it would.
  torch::nn::Sequential block = mlp();
  const torch::Tensor x = torch::randn({4, 8}).requires_grad_();
  for (int i = 0; i < 2; ++i) block->forward(x).sum().backward();
  const auto plain_grads = grads_of(*block);
  block->zero_grad();
  for (int i = 0; i < 2; ++i) runner::checkpoint(block, x).sum().backward();
  expect_equal(grads_of(*block), plain_grads, "accumulated gradient");
}

TEST_F(Checkpoint, UnderNoGradItOnlyRunsTheBlock) {
  torch::nn::Sequential block = mlp();
  int calls = 0;
  torch::NoGradGuard no_grad;
  const torch::Tensor out = runner::checkpoint(counted(block, calls), torch::randn({4, 8}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out.grad_fn(), nullptr);
  EXPECT_FALSE(out.requires_grad());
}

TEST_F(Checkpoint, AnInputWithoutGradRunsPlainlyWithoutTheModuleAndIsRecomputedWithIt) {
  torch::nn::Sequential block = mlp();
  const torch::Tensor x = torch::randn({4, 8});
  block->forward(x).sum().backward();
  const auto plain_grads = grads_of(*block);

  // Without the module, whether its parameters need grad is unknown: the
  // block runs as it is (autograd keeps what it needs; nothing recomputed).
  block->zero_grad();
  int calls = 0;
  torch::Tensor out = runner::checkpoint(counted(block, calls), x);
  EXPECT_EQ(out.grad_fn()->name().find("CheckpointFunction"), std::string::npos);
  out.sum().backward();
  EXPECT_EQ(calls, 1);
  expect_equal(grads_of(*block), plain_grads, "parameter gradient (plain run)");

  // With it, the parameters that need grad make the block checkpointed.
  block->zero_grad();
  calls = 0;
  out = runner::checkpoint(*block, counted(block, calls), x);
  EXPECT_NE(out.grad_fn()->name().find("CheckpointFunction"), std::string::npos);
  out.sum().backward();
  EXPECT_EQ(calls, 2);
  expect_equal(grads_of(*block), plain_grads, "parameter gradient (checkpointed)");

  // Frozen parameters and an input without grad: nothing to differentiate.
  for (auto& p : block->parameters()) p.requires_grad_(false);
  calls = 0;
  out = runner::checkpoint(*block, counted(block, calls), x);
  EXPECT_FALSE(out.requires_grad());
  EXPECT_EQ(calls, 1);
}

TEST_F(Checkpoint, DropoutDrawsTheForwardsMasksAndTheRandomStreamGoesOnAsWithout) {
  torch::nn::Sequential block(torch::nn::Linear(8, 64), torch::nn::Dropout(0.5),
                              torch::nn::Linear(64, 8), torch::nn::Dropout(0.5));
  block->train();
  const torch::Tensor x = torch::randn({16, 8});

  torch::manual_seed(7);
  const torch::Tensor plain_in = x.clone().requires_grad_();
  const torch::Tensor plain = block->forward(plain_in);
  plain.pow(2).sum().backward();
  const torch::Tensor plain_next = torch::rand({32});
  const auto plain_grads = grads_of(*block);
  block->zero_grad();

  torch::manual_seed(7);
  const torch::Tensor in = x.clone().requires_grad_();
  const torch::Tensor out = runner::checkpoint(block, in);
  // Something else draws between forward and backward: the recomputation
  // must still see the forward's state, and leave this draw's after it.
  static_cast<void>(torch::rand({3}));
  out.pow(2).sum().backward();
  const torch::Tensor next = torch::rand({32});

  EXPECT_TRUE(torch::equal(out, plain));
  EXPECT_TRUE(torch::equal(in.grad(), plain_in.grad()));
  expect_equal(grads_of(*block), plain_grads, "parameter gradient");
  EXPECT_FALSE(torch::equal(next, plain_next));  // the draw between moved the stream
  // Without a draw between, the stream after backward is plain training's:
  // the recomputation's draws are not taken from it.
  torch::manual_seed(7);
  runner::checkpoint(block, x.clone().requires_grad_()).pow(2).sum().backward();
  EXPECT_TRUE(torch::equal(torch::rand({32}), plain_next));
}

TEST_F(Checkpoint, BatchNormStatisticsAreUpdatedOnceWhenTheModuleIsGiven) {
  auto make = [] {
    torch::manual_seed(3);
    return torch::nn::Sequential(torch::nn::Linear(8, 8), torch::nn::BatchNorm1d(8));
  };
  const torch::Tensor x = torch::randn({16, 8}) * 3 + 1;
  torch::nn::Sequential plain = make(), given = make(), not_given = make();
  plain->forward(x.clone().requires_grad_()).sum().backward();
  runner::checkpoint(given, x.clone().requires_grad_()).sum().backward();
  runner::checkpoint([not_given](const torch::Tensor& t) mutable { return not_given->forward(t); },
                     x.clone().requires_grad_())
      .sum()
      .backward();

  std::map<std::string, torch::Tensor> expected, with_module, without;
  for (const auto& b : plain->named_buffers()) expected[b.key()] = b.value();
  for (const auto& b : given->named_buffers()) with_module[b.key()] = b.value();
  for (const auto& b : not_given->named_buffers()) without[b.key()] = b.value();
  expect_equal(with_module, expected, "buffer");
  EXPECT_EQ(expected.at("1.num_batches_tracked").item<std::int64_t>(), 1);
  // The block alone cannot be protected: the recomputation updates again
  // (what PyTorch's reentrant checkpoint does).
  EXPECT_EQ(without.at("1.num_batches_tracked").item<std::int64_t>(), 2);
  EXPECT_FALSE(torch::equal(without.at("1.running_mean"), expected.at("1.running_mean")));
  expect_equal(grads_of(*given), grads_of(*plain), "parameter gradient");
}

// Autocast on the CPU for the scope, as torch.autocast("cpu", bfloat16).
class CpuAutocast {
 public:
  CpuAutocast() {
    at::autocast::set_autocast_enabled(c10::DeviceType::CPU, true);
    at::autocast::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuAutocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(c10::DeviceType::CPU, false);
  }
  CpuAutocast(const CpuAutocast&) = delete;
  CpuAutocast& operator=(const CpuAutocast&) = delete;
};

TEST_F(Checkpoint, TheRecomputationRunsUnderTheForwardsAutocast) {
  torch::nn::Sequential block = mlp();
  const torch::Tensor x = torch::randn({4, 8});

  torch::Tensor plain;
  {
    CpuAutocast autocast;
    plain = block->forward(x.clone().requires_grad_());
  }
  ASSERT_EQ(plain.scalar_type(), at::kBFloat16);
  plain.to(torch::kFloat).pow(2).sum().backward();
  const auto plain_grads = grads_of(*block);
  block->zero_grad();

  torch::Tensor out;
  {
    CpuAutocast autocast;
    out = runner::checkpoint(block, x.clone().requires_grad_());
  }
  // Backward outside autocast, as a training step does it.
  out.to(torch::kFloat).pow(2).sum().backward();
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_TRUE(torch::equal(out, plain));
  expect_equal(grads_of(*block), plain_grads, "parameter gradient under autocast");
}

TEST(CheckpointPolicy, ChoosesBlocksByMode) {
  const runner::CheckpointPolicy none{"none", 2}, blocks{"blocks", 2}, every3{"every_k", 3};
  for (std::int64_t i = 0; i < 7; ++i) {
    EXPECT_FALSE(none.applies_to(i));
    EXPECT_TRUE(blocks.applies_to(i));
    EXPECT_EQ(every3.applies_to(i), i == 0 || i == 3 || i == 6) << i;
  }
  EXPECT_TRUE(none.none());
  EXPECT_FALSE(every3.none());
}

}  // namespace
