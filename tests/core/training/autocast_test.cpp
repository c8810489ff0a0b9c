// AutocastGuard against torch.autocast("cpu", dtype): a small model's
// operators give the dtypes Python's autocast gives, the same outputs, loss
// and gradients; nested guards restore the state they found; unsupported
// devices and dtypes are refused.
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/training/autocast.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::training::AutocastGuard;
using Dict = c10::Dict<c10::IValue, c10::IValue>;

struct SmallImpl : torch::nn::Module {
  SmallImpl()
      : conv(register_module("conv",
                             torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)))),
        fc1(register_module("fc1", torch::nn::Linear(8 * 8 * 8, 32))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({32})))),
        fc2(register_module("fc2", torch::nn::Linear(32, 10))) {}
  torch::nn::Conv2d conv;
  torch::nn::Linear fc1;
  torch::nn::LayerNorm norm;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Small);

Dict reference(const std::string& dtype, const std::string& backward) {
  const fs::path out = fs::temp_directory_path() / ("runner_autocast_" + std::to_string(::getpid()) +
                                                    "_" + dtype + backward + ".pt");
  const auto r = runner::test::run_oracle(
      "autocast_reference.py", {"--dtype", dtype, "--backward", backward, "--out", out.string()});
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(out);
  return torch::pickle_load(bytes).toGenericDict();
}

std::map<std::string, torch::Tensor> tensors_of(const c10::IValue& dict) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : dict.toGenericDict())
    out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

// The same kernels run on the same values in the same order on one thread,
// so the results are expected to be the same bits; the test says by how much
// they differ when they do not.
void expect_same(const torch::Tensor& actual, const torch::Tensor& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what << ": autocast's dtype";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(torch::equal(actual, expected))
      << what << ": max |difference| "
      << (actual.to(torch::kDouble) - expected.to(torch::kDouble)).abs().max().item<double>();
}

void check_parity(c10::ScalarType dtype, const std::string& backward) {
  RUNNER_REQUIRE_ORACLE("torch");
  at::set_num_threads(1);
  const std::string dtype_name = dtype == c10::ScalarType::BFloat16 ? "bfloat16" : "float16";
  const Dict ref = reference(dtype_name, backward);
  Small model;
  {
    torch::NoGradGuard no_grad;
    const auto state = tensors_of(ref.at("state"));
    for (auto& p : model->named_parameters()) p.value().copy_(state.at(p.key()));
  }
  const torch::Tensor x = ref.at("x").toTensor();
  const torch::Tensor targets = ref.at("targets").toTensor();
  std::map<std::string, torch::Tensor> out;
  {
    AutocastGuard autocast(c10::DeviceType::CPU, dtype);
    out["conv"] = model->conv(x);
    out["gelu1"] = torch::gelu(out["conv"]);
    out["fc1"] = model->fc1(out["gelu1"].flatten(1));
    out["norm"] = model->norm(out["fc1"]);
    out["gelu2"] = torch::gelu(out["norm"]);
    out["fc2"] = model->fc2(out["gelu2"]);
    out["loss"] = torch::nn::functional::cross_entropy(out["fc2"], targets);
    if (backward == "inside") out["loss"].backward();
  }
  if (backward == "outside") out["loss"].backward();

  const auto expected = tensors_of(ref.at("outputs"));
  ASSERT_EQ(expected.size(), out.size());
  for (const auto& [name, tensor] : out) expect_same(tensor.detach(), expected.at(name), name);
  // The low-precision operators really ran in the low precision.
  EXPECT_EQ(out["fc1"].scalar_type(), dtype);
  EXPECT_EQ(out["loss"].scalar_type(), torch::kFloat32);
  const auto grads = tensors_of(ref.at("grads"));
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    expect_same(p.value().grad(), grads.at(p.key()), "gradient of " + p.key());
  }
}

TEST(AutocastParity, Bfloat16OnTheCpuMatchesTorchAutocast) {
  check_parity(c10::ScalarType::BFloat16, "outside");
}
TEST(AutocastParity, Bfloat16WithBackwardInsideTheRegionMatchesTorchAutocast) {
  check_parity(c10::ScalarType::BFloat16, "inside");
}
TEST(AutocastParity, Float16OnTheCpuMatchesTorchAutocast) {
  check_parity(c10::ScalarType::Half, "outside");
}

torch::ScalarType mm_dtype() {
  const torch::Tensor a = torch::ones({2, 2});
  return torch::mm(a, a).scalar_type();
}

TEST(Autocast, NestedGuardsRestoreTheStateTheyFound) {
  using at::autocast::get_autocast_dtype;
  using at::autocast::is_autocast_cache_enabled;
  using at::autocast::is_autocast_enabled;
  const auto cpu = c10::DeviceType::CPU;
  ASSERT_FALSE(is_autocast_enabled(cpu));
  const c10::ScalarType outside_dtype = get_autocast_dtype(cpu);
  at::autocast::set_autocast_cache_enabled(false);  // the guard turns it on, and back off
  EXPECT_EQ(mm_dtype(), torch::kFloat32);
  {
    AutocastGuard outer(cpu, c10::ScalarType::Half);
    EXPECT_TRUE(is_autocast_enabled(cpu));
    EXPECT_TRUE(is_autocast_cache_enabled());
    EXPECT_EQ(mm_dtype(), torch::kHalf);
    {
      AutocastGuard inner(cpu, c10::ScalarType::BFloat16);
      EXPECT_EQ(get_autocast_dtype(cpu), c10::ScalarType::BFloat16);
      EXPECT_EQ(mm_dtype(), torch::kBFloat16);
    }
    EXPECT_TRUE(is_autocast_enabled(cpu));
    EXPECT_EQ(get_autocast_dtype(cpu), c10::ScalarType::Half);
    EXPECT_EQ(mm_dtype(), torch::kHalf);
  }
  EXPECT_FALSE(is_autocast_enabled(cpu));
  EXPECT_EQ(get_autocast_dtype(cpu), outside_dtype);
  EXPECT_FALSE(is_autocast_cache_enabled());
  EXPECT_EQ(mm_dtype(), torch::kFloat32);
  at::autocast::set_autocast_cache_enabled(true);
  // Back at nesting level 0: the next region is the outermost again.
  EXPECT_EQ(at::autocast::increment_nesting(), 1);
  EXPECT_EQ(at::autocast::decrement_nesting(), 0);
}

TEST(Autocast, ACudaGuardLeavesTheCpuAlone) {
  {
    AutocastGuard cuda(c10::DeviceType::CUDA, c10::ScalarType::Half);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
    EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(mm_dtype(), torch::kFloat32);
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
}

TEST(Autocast, OtherDevicesAndDtypesAreRefused) {
  EXPECT_THROW_MSG((AutocastGuard{c10::DeviceType::CPU, c10::ScalarType::Float}), runner::Error,
                   "autocast lowers to bfloat16 or float16, not Float");
  EXPECT_THROW_MSG((AutocastGuard{c10::DeviceType::XLA, c10::ScalarType::BFloat16}), runner::Error,
                   "autocast runs on cpu or cuda, not xla");
  // A refused guard changed nothing.
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(at::autocast::increment_nesting(), 1);
  EXPECT_EQ(at::autocast::decrement_nesting(), 0);
}

}  // namespace
