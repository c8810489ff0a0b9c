// Gradient clipping by global norm against torch.nn.utils.clip_grad_norm_:
// the returned norm and the gradients after clipping, under and over
// max_norm, with inf and nan gradients, mixed dtypes and no gradients.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runner/training/clip.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::training::clip_grad_norm;

struct ClipCase {
  std::vector<torch::Tensor> grads, clipped;
  std::vector<bool> has_grad;
  double max_norm = 0.0;
  torch::Tensor norm;
};

std::vector<torch::Tensor> tensors(const c10::IValue& list) {
  std::vector<torch::Tensor> out;
  for (const c10::IValue& v : list.toListRef()) out.push_back(v.toTensor());
  return out;
}

c10::Dict<c10::IValue, c10::IValue> reference() {
  const fs::path out =
      fs::temp_directory_path() / ("runner_clip_" + std::to_string(::getpid()) + ".pt");
  const auto r = runner::test::run_oracle("clip_reference.py", {"--out", out.string()});
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(out);
  return torch::pickle_load(bytes).toGenericDict();
}

ClipCase read_case(const c10::Dict<c10::IValue, c10::IValue>& all, const std::string& name) {
  const auto c = all.at(name).toGenericDict();
  ClipCase out;
  out.grads = tensors(c.at("grads"));
  out.clipped = tensors(c.at("clipped"));
  const torch::Tensor has = c.at("has_grad").toTensor();
  for (std::int64_t i = 0; i < has.numel(); ++i) out.has_grad.push_back(has[i].item<bool>());
  out.max_norm = c.at("max_norm").toTensor().item<double>();
  out.norm = c.at("norm").toTensor();
  return out;
}

// Exact equality, NaN equal to NaN: both sides run the same ATen kernels on
// the same data in the same order.
void expect_same(const torch::Tensor& actual, const torch::Tensor& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::isclose(actual, expected, 0.0, 0.0, /*equal_nan=*/true).all().item<bool>())
      << what << ":\n"
      << actual << "\nvs PyTorch's\n"
      << expected;
}

// Clips the case's gradients with runner and compares with PyTorch's.
void check(const c10::Dict<c10::IValue, c10::IValue>& all, const std::string& name) {
  SCOPED_TRACE(name);
  const ClipCase c = read_case(all, name);
  std::vector<torch::Tensor> parameters;
  for (std::size_t i = 0; i < c.grads.size(); ++i) {
    torch::Tensor p = torch::zeros(c.has_grad[i] ? c.grads[i].sizes() : torch::IntArrayRef{4},
                                   torch::dtype(c.grads[i].scalar_type()))
                          .requires_grad_();
    if (c.has_grad[i]) p.mutable_grad() = c.grads[i].clone();
    parameters.push_back(p);
  }
  const torch::Tensor norm = clip_grad_norm(parameters, c.max_norm);
  EXPECT_EQ(norm.dim(), 0);
  expect_same(norm, c.norm, "norm");
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!c.has_grad[i]) {
      EXPECT_FALSE(parameters[i].grad().defined()) << "parameter " << i;
      continue;
    }
    expect_same(parameters[i].grad(), c.clipped[i], "gradient " + std::to_string(i));
  }
}

// One oracle run for every case: starting Python is most of the test's time.
TEST(ClipParity, NormAndGradientsMatchClipGradNormInEveryCase) {
  RUNNER_REQUIRE_ORACLE("torch");
  at::set_num_threads(1);
  const auto all = reference();
  // Each case is what it claims to be.
  EXPECT_LT(read_case(all, "under").norm.item<double>(), read_case(all, "under").max_norm);
  EXPECT_GT(read_case(all, "over").norm.item<double>(), read_case(all, "over").max_norm);
  EXPECT_TRUE(std::isinf(read_case(all, "inf").norm.item<double>()));
  EXPECT_TRUE(std::isnan(read_case(all, "nan").norm.item<double>()));
  EXPECT_EQ(read_case(all, "none").norm.item<double>(), 0.0);
  // under, over: finite norms below and above max_norm; inf, nan: one
  // non-finite gradient; mixed: float32 and bfloat16 gradients and a
  // parameter without one; none: no gradients at all.
  for (const std::string name : {"under", "over", "inf", "nan", "mixed", "none"}) check(all, name);
}

TEST(Clip, TheNormIsTheL2NormOfAllGradientsTogether) {
  torch::Tensor a = torch::zeros({2}).requires_grad_();
  torch::Tensor b = torch::zeros({1}).requires_grad_();
  a.mutable_grad() = torch::tensor({3.0F, 0.0F});
  b.mutable_grad() = torch::tensor({4.0F});
  const torch::Tensor norm = clip_grad_norm({a, b}, 1.0);
  EXPECT_FLOAT_EQ(norm.item<float>(), 5.0F);
  // Scaled by 1 / (5 + 1e-6): just under max_norm.
  const double after = std::hypot(a.grad()[0].item<double>(), b.grad()[0].item<double>());
  EXPECT_NEAR(after, 1.0, 1e-6);
  EXPECT_LT(after, 1.0);
}

}  // namespace
