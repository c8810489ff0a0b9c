// The kernels plugin's runner::* ops on CPU, called through the dispatcher
// after loading the built plugin: every op's functional form, out variant
// and backward against ATen in float64, for the four dtypes, at shapes with
// partial last vectors (cols 1, 7, 33, 1000, 4097; one row and many; 3-D)
// and sizes that run in parallel; out variants write every element (the out
// tensor is NaN first); the argument checks' exact messages; the Autograd
// path against ATen's autograd. cpu.cmake runs this file once per
// instruction set (ATEN_CPU_CAPABILITY), and the first test checks that the
// kernels of that instruction set are the ones running.
#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kPlugin =
    fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins" / "runner_plugin_kernels.so";

// Loading the library registers its ops; it stays loaded for the process.
void load_plugin() {
  static const boost::dll::shared_library library(kPlugin.string());
  (void)library;
}

template <typename Signature>
c10::TypedOperatorHandle<Signature> op(const char* name, const char* overload = "") {
  load_plugin();
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

// Each op through the dispatcher, as a model or the host calls it.
at::Tensor scale(const at::Tensor& x, double s) {
  return op<at::Tensor(const at::Tensor&, double)>("runner::scale").call(x, s);
}
at::Tensor& scale_out(const at::Tensor& x, double s, at::Tensor& out) {
  return op<at::Tensor&(const at::Tensor&, double, at::Tensor&)>("runner::scale", "out")
      .call(x, s, out);
}
at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& b, const std::string& a) {
  return op<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>(
             "runner::bias_gelu")
      .call(x, b, a);
}
at::Tensor& bias_gelu_out(const at::Tensor& x, const at::Tensor& b, const std::string& a,
                          at::Tensor& out) {
  return op<at::Tensor&(const at::Tensor&, const at::Tensor&, c10::string_view, at::Tensor&)>(
             "runner::bias_gelu", "out")
      .call(x, b, a, out);
}
at::Tensor bias_gelu_backward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& b,
                              const std::string& a) {
  return op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                       c10::string_view)>("runner::bias_gelu_backward")
      .call(g, x, b, a);
}
at::Tensor softmax(const at::Tensor& x) {
  return op<at::Tensor(const at::Tensor&)>("runner::softmax").call(x);
}
at::Tensor& softmax_out(const at::Tensor& x, at::Tensor& out) {
  return op<at::Tensor&(const at::Tensor&, at::Tensor&)>("runner::softmax", "out").call(x, out);
}
at::Tensor softmax_backward(const at::Tensor& g, const at::Tensor& y) {
  return op<at::Tensor(const at::Tensor&, const at::Tensor&)>("runner::softmax_backward")
      .call(g, y);
}
at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("runner::rmsnorm")
      .call(x, w, eps);
}
at::Tensor& rmsnorm_out(const at::Tensor& x, const at::Tensor& w, double eps, at::Tensor& out) {
  return op<at::Tensor&(const at::Tensor&, const at::Tensor&, double, at::Tensor&)>(
             "runner::rmsnorm", "out")
      .call(x, w, eps, out);
}
std::tuple<at::Tensor, at::Tensor> rmsnorm_backward(const at::Tensor& g, const at::Tensor& x,
                                                    const at::Tensor& w, double eps) {
  return op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&, double)>(
             "runner::rmsnorm_backward")
      .call(g, x, w, eps);
}
at::Tensor layernorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
             "runner::layernorm")
      .call(x, w, b, eps);
}
at::Tensor& layernorm_out(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                          double eps, at::Tensor& out) {
  return op<at::Tensor&(const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                        at::Tensor&)>("runner::layernorm", "out")
      .call(x, w, b, eps, out);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward(const at::Tensor& g,
                                                                  const at::Tensor& x,
                                                                  const at::Tensor& w,
                                                                  double eps) {
  return op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                           const at::Tensor&, double)>(
             "runner::layernorm_backward")
      .call(g, x, w, eps);
}

// max|y - ref| / max|ref| in float64 (the absolute error when ref is 0).
double relative_error(const at::Tensor& y, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble);
  const double scale = r.abs().max().item<double>();
  return (y.to(at::kDouble) - r).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

at::Tensor f64(const at::Tensor& t) { return t.to(at::kDouble); }

// A fresh output full of NaN: an element the op does not write stays NaN.
at::Tensor poisoned(const at::Tensor& like) {
  return at::full_like(like, std::numeric_limits<double>::quiet_NaN());
}

bool has_nan(const at::Tensor& t) { return t.isnan().any().item<bool>(); }

// Tolerances of these tests (relative to the largest reference value): a
// little above what the kernels reach (float32: a few ulps through exp/erf,
// reduced types: one final rounding, 2^-9 for bfloat16 and 2^-11 for
// float16), far below what a wrong index or formula gives.
double forward_tolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble: return 1e-12;
    case at::kBFloat16: return 8e-3;
    case at::kHalf: return 1e-3;
    default: return 5e-6;
  }
}

// Backward outputs: weight gradients sum over rows before their rounding.
double backward_tolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble: return 1e-11;
    case at::kBFloat16: return 1.5e-2;
    case at::kHalf: return 3e-3;
    default: return 2e-5;
  }
}

std::string name_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble: return "float64";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return "float32";
  }
}

std::string shape_name(const std::vector<std::int64_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// The shapes of every op test: partial last vectors of every width (the
// widest, AVX-512 bfloat16, is 32 elements), one row and many, 3-D, and
// sizes above the kernels' parallel grain (32768 elements).
const std::vector<std::vector<std::int64_t>> kShapes = {
    {1},       {7},        {33},     {1000},      {4097},      {3, 1},    {5, 7},
    {64, 33},  {40, 1000}, {9, 4097}, {2, 3, 33}, {4, 5, 7},  {300, 129}, {70000}};

class KernelsCpu : public ::testing::TestWithParam<at::ScalarType> {
 public:
  void SetUp() override {
    load_plugin();
    torch::manual_seed(0);
  }
  at::ScalarType dtype() const { return GetParam(); }
  at::Tensor randn(at::IntArrayRef shape) const { return at::randn(shape, at::TensorOptions(dtype())); }
};

TEST(KernelsCpuCapability, RunsTheInstructionSetAtenRuns) {
  load_plugin();
  const std::string ours =
      op<std::string()>("runner::_cpu_capability").call();
  std::string aten = at::get_cpu_capability();
  std::transform(aten.begin(), aten.end(), aten.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  EXPECT_EQ(ours, aten);
  if (const char* requested = std::getenv("ATEN_CPU_CAPABILITY"); requested != nullptr) {
    if (aten != requested) GTEST_SKIP() << "this CPU lacks " << requested << "; ATen runs " << aten;
    EXPECT_EQ(ours, requested);
  }
}

TEST_P(KernelsCpu, ScaleForwardAndOut) {
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(shape_name(shape));
    const at::Tensor x = randn(shape);
    const at::Tensor ref = f64(x) * -1.75;
    const at::Tensor y = scale(x, -1.75);
    EXPECT_EQ(y.scalar_type(), dtype());
    EXPECT_LE(relative_error(y, ref), forward_tolerance(dtype()));
    at::Tensor out = poisoned(x);
    at::Tensor& returned = scale_out(x, -1.75, out);
    EXPECT_EQ(returned.data_ptr(), out.data_ptr());
    EXPECT_FALSE(has_nan(out));
    EXPECT_TRUE(at::equal(out, y));
  }
}

TEST_P(KernelsCpu, ScaleMatchesAtenMulExactly) {
  // One product rounded once: the same bits as ATen's mul.
  const at::Tensor x = randn({257, 33});
  EXPECT_TRUE(at::equal(scale(x, 0.3), at::mul(x, 0.3)));
}

TEST_P(KernelsCpu, ScaleInPlaceThroughOut) {
  at::Tensor x = randn({5, 33});
  const at::Tensor expected = scale(x, 3.0);
  scale_out(x, 3.0, x);
  EXPECT_TRUE(at::equal(x, expected));
}

TEST_P(KernelsCpu, BiasGeluForwardOutAndBackward) {
  for (const std::string approximate : {"none", "tanh"}) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(approximate + " " + shape_name(shape));
      const at::Tensor x = randn(shape);
      const at::Tensor b = randn({shape.back()});
      const at::Tensor y = bias_gelu(x, b, approximate);
      const at::Tensor ref = at::gelu(f64(x) + f64(b), approximate);
      EXPECT_LE(relative_error(y, ref), forward_tolerance(dtype()));
      at::Tensor out = poisoned(x);
      bias_gelu_out(x, b, approximate, out);
      EXPECT_FALSE(has_nan(out));
      EXPECT_TRUE(at::equal(out, y));

      const at::Tensor g = randn(shape);
      const at::Tensor dx = bias_gelu_backward(g, x, b, approximate);
      const at::Tensor dref = at::gelu_backward(f64(g), f64(x) + f64(b), approximate);
      EXPECT_FALSE(has_nan(dx));
      EXPECT_LE(relative_error(dx, dref), backward_tolerance(dtype()));
    }
  }
}

TEST_P(KernelsCpu, SoftmaxForwardOutAndBackward) {
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(shape_name(shape));
    const at::Tensor x = randn(shape) * 3;
    const at::Tensor y = softmax(x);
    EXPECT_LE(relative_error(y, at::softmax(f64(x), -1)), forward_tolerance(dtype()));
    at::Tensor out = poisoned(x);
    softmax_out(x, out);
    EXPECT_FALSE(has_nan(out));
    EXPECT_TRUE(at::equal(out, y));

    const at::Tensor g = randn(shape);
    const at::Tensor dx = softmax_backward(g, y);
    const at::Tensor dref = at::_softmax_backward_data(f64(g), f64(y), -1, at::kDouble);
    EXPECT_LE(relative_error(dx, dref), backward_tolerance(dtype()));
  }
}

TEST_P(KernelsCpu, SoftmaxIsStableForLargeAndInfiniteInputs) {
  // exp(1000) overflows; the row maximum is subtracted first.
  at::Tensor x = randn({6, 37}) * 1000;
  x.index_put_({0, 3}, -std::numeric_limits<double>::infinity());
  const at::Tensor y = softmax(x);
  EXPECT_FALSE(has_nan(y));
  EXPECT_LE(relative_error(y, at::softmax(f64(x), -1)), forward_tolerance(dtype()));
  EXPECT_EQ(y.index({0, 3}).item<double>(), 0.0);
}

TEST_P(KernelsCpu, RmsnormForwardOutAndBackward) {
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(shape_name(shape));
    const at::Tensor x = randn(shape);
    const at::Tensor w = randn({shape.back()});
    const double eps = 1e-6;
    const at::Tensor y = rmsnorm(x, w, eps);
    const at::Tensor ref = at::rms_norm(f64(x), {shape.back()}, f64(w), eps);
    EXPECT_LE(relative_error(y, ref), forward_tolerance(dtype()));
    at::Tensor out = poisoned(x);
    rmsnorm_out(x, w, eps, out);
    EXPECT_FALSE(has_nan(out));
    EXPECT_TRUE(at::equal(out, y));

    const at::Tensor x64 = f64(x).requires_grad_();
    const at::Tensor w64 = f64(w).requires_grad_();
    const at::Tensor g = randn(shape);
    at::rms_norm(x64, {shape.back()}, w64, eps).backward(f64(g));
    const auto [dx, dw] = rmsnorm_backward(g, x, w, eps);
    EXPECT_EQ(dw.sizes(), w.sizes());
    // With one column y = w x / sqrt(x^2 + eps) is flat: dx is eps-sized, the
    // difference of two w g / |x| terms, and any precision's cancellation.
    if (shape.back() > 1) {
      EXPECT_LE(relative_error(dx, x64.grad()), backward_tolerance(dtype()));
    }
    EXPECT_LE(relative_error(dw, w64.grad()), backward_tolerance(dtype()));
  }
}

TEST_P(KernelsCpu, LayernormForwardOutAndBackward) {
  for (const auto& shape : kShapes) {
    if (shape.back() == 1) continue;  // one column: every output is the bias, every dx 0
    SCOPED_TRACE(shape_name(shape));
    const at::Tensor x = randn(shape);
    const at::Tensor w = randn({shape.back()});
    const at::Tensor b = randn({shape.back()});
    const double eps = 1e-5;
    const at::Tensor y = layernorm(x, w, b, eps);
    const at::Tensor ref = at::layer_norm(f64(x), {shape.back()}, f64(w), f64(b), eps);
    EXPECT_LE(relative_error(y, ref), forward_tolerance(dtype()));
    at::Tensor out = poisoned(x);
    layernorm_out(x, w, b, eps, out);
    EXPECT_FALSE(has_nan(out));
    EXPECT_TRUE(at::equal(out, y));

    const at::Tensor x64 = f64(x).requires_grad_();
    const at::Tensor w64 = f64(w).requires_grad_();
    const at::Tensor b64 = f64(b).requires_grad_();
    const at::Tensor g = randn(shape);
    at::layer_norm(x64, {shape.back()}, w64, b64, eps).backward(f64(g));
    const auto [dx, dw, db] = layernorm_backward(g, x, w, eps);
    EXPECT_LE(relative_error(dx, x64.grad()), backward_tolerance(dtype()));
    EXPECT_LE(relative_error(dw, w64.grad()), backward_tolerance(dtype()));
    EXPECT_LE(relative_error(db, b64.grad()), backward_tolerance(dtype()));
  }
}

TEST_P(KernelsCpu, LayernormOfOneColumnIsTheBias) {
  const at::Tensor x = randn({4, 1});
  const at::Tensor w = randn({1});
  const at::Tensor b = randn({1});
  EXPECT_TRUE(at::equal(layernorm(x, w, b, 1e-5), b.expand({4, 1})));
}

TEST_P(KernelsCpu, NormsOfRowsFarFromZero) {
  // A large common offset: a one-pass variance (E[x^2] - E[x]^2) would
  // lose every digit in float32; two passes keep the reference's.
  if (dtype() != at::kFloat && dtype() != at::kDouble) GTEST_SKIP() << "offset beyond the precision";
  const at::Tensor x = randn({16, 1000}) + 1000;
  const at::Tensor w = randn({1000});
  const at::Tensor b = randn({1000});
  const at::Tensor ref = at::layer_norm(f64(x), {1000}, f64(w), f64(b), 1e-5);
  EXPECT_LE(relative_error(layernorm(x, w, b, 1e-5), ref), dtype() == at::kFloat ? 2e-4 : 1e-12);
}

TEST_P(KernelsCpu, LargeOutputsStreamedPastTheCaches) {
  // Outputs of 16 MiB and more are written with streaming stores where a
  // row's vectors are aligned (8192 columns), plain stores elsewhere (4099).
  if (dtype() == at::kDouble) GTEST_SKIP() << "float32 and the 16-bit types cover the paths";
  for (const std::int64_t cols : {8192, 4099}) {
    SCOPED_TRACE(cols);
    const std::int64_t rows = (16 << 20) / (cols * at::elementSize(dtype())) + 3;
    const at::Tensor x = randn({rows, cols});
    const at::Tensor w = randn({cols});
    const at::Tensor b = randn({cols});
    ASSERT_GE(x.nbytes(), 16u << 20);
    const auto x64 = f64(x), w64 = f64(w), b64 = f64(b);
    at::Tensor out = poisoned(x);
    scale_out(x, 1.5, out);
    EXPECT_LE(relative_error(out, x64 * 1.5), forward_tolerance(dtype()));
    out = poisoned(x);
    bias_gelu_out(x, b, "none", out);
    EXPECT_LE(relative_error(out, at::gelu(x64 + b64)), forward_tolerance(dtype()));
    out = poisoned(x);
    softmax_out(x, out);
    EXPECT_LE(relative_error(out, at::softmax(x64, -1)), forward_tolerance(dtype()));
    out = poisoned(x);
    rmsnorm_out(x, w, 1e-6, out);
    EXPECT_LE(relative_error(out, at::rms_norm(x64, {cols}, w64, 1e-6)), forward_tolerance(dtype()));
    out = poisoned(x);
    layernorm_out(x, w, b, 1e-5, out);
    EXPECT_LE(relative_error(out, at::layer_norm(x64, {cols}, w64, b64, 1e-5)),
              forward_tolerance(dtype()));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KernelsCpu,
                         ::testing::Values(at::kFloat, at::kDouble, at::kBFloat16, at::kHalf),
                         [](const auto& info) { return name_of(info.param); });

// ------------------------------------------------------------------ autograd

// The Autograd implementations against ATen's autograd in float64, with
// gradients of a weighted sum (a random upstream gradient) and of a plain
// sum (an expanded, non-contiguous upstream gradient).
class KernelsCpuAutograd : public ::testing::Test {
 public:
  void SetUp() override {
    load_plugin();
    torch::manual_seed(0);
  }
  static at::Tensor leaf(at::IntArrayRef shape) {
    return at::randn(shape, at::TensorOptions(at::kDouble)).requires_grad_();
  }
  // Runs `f` on leaves and `ref` on copies of them, backward from `g` (or
  // from sum() when g is undefined), and compares the leaves' gradients.
  template <typename F, typename R>
  static void compare(const std::vector<at::Tensor>& leaves, const F& f, const R& ref,
                      const at::Tensor& g) {
    std::vector<at::Tensor> copies;
    for (const auto& t : leaves) copies.push_back(t.detach().clone().requires_grad_());
    const at::Tensor y = f(leaves);
    const at::Tensor y_ref = ref(copies);
    EXPECT_TRUE(y.requires_grad());
    EXPECT_LE(relative_error(y, y_ref), 1e-12);
    if (g.defined()) {
      y.backward(g);
      y_ref.backward(g);
    } else {
      y.sum().backward();
      y_ref.sum().backward();
    }
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      ASSERT_TRUE(leaves[i].grad().defined());
      // Relative to 1 at least: softmax's gradient of a plain sum is 0 up to
      // rounding on both sides.
      const at::Tensor& ref_grad = copies[i].grad();
      const double scale = std::max(1.0, ref_grad.abs().max().item<double>());
      EXPECT_LE((leaves[i].grad() - ref_grad).abs().max().item<double>() / scale, 1e-10);
    }
  }
};

TEST_F(KernelsCpuAutograd, Scale) {
  for (const bool weighted : {true, false}) {
    const at::Tensor x = leaf({7, 33});
    compare(
        {x}, [](const auto& in) { return scale(in[0], 0.7); },
        [](const auto& in) { return in[0] * 0.7; },
        weighted ? at::randn({7, 33}, at::kDouble) : at::Tensor());
  }
}

TEST_F(KernelsCpuAutograd, ScaleTwice) {
  // scale's backward is scale through the dispatcher: differentiable again.
  const at::Tensor x = leaf({4, 9});
  const at::Tensor y = scale(x, 1.5);
  const at::Tensor gx = torch::autograd::grad({(y * y).sum()}, {x}, {}, true, true)[0];
  gx.sum().backward();
  // d/dx of sum(d/dx sum((1.5 x)^2)) = d/dx sum(4.5 x) = 4.5.
  EXPECT_LE(relative_error(x.grad(), at::full_like(x, 4.5)), 1e-12);
}

TEST_F(KernelsCpuAutograd, BiasGelu) {
  for (const std::string approximate : {"none", "tanh"}) {
    for (const bool weighted : {true, false}) {
      SCOPED_TRACE(approximate);
      compare(
          {leaf({3, 5, 33}), leaf({33})},
          [&](const auto& in) { return bias_gelu(in[0], in[1], approximate); },
          [&](const auto& in) { return at::gelu(in[0] + in[1], approximate); },
          weighted ? at::randn({3, 5, 33}, at::kDouble) : at::Tensor());
    }
  }
}

TEST_F(KernelsCpuAutograd, Softmax) {
  for (const bool weighted : {true, false})
    compare(
        {leaf({9, 1000})}, [](const auto& in) { return softmax(in[0]); },
        [](const auto& in) { return at::softmax(in[0], -1); },
        weighted ? at::randn({9, 1000}, at::kDouble) : at::Tensor());
}

TEST_F(KernelsCpuAutograd, Rmsnorm) {
  for (const bool weighted : {true, false})
    compare(
        {leaf({2, 9, 129}), leaf({129})},
        [](const auto& in) { return rmsnorm(in[0], in[1], 1e-6); },
        [](const auto& in) { return at::rms_norm(in[0], {129}, in[1], 1e-6); },
        weighted ? at::randn({2, 9, 129}, at::kDouble) : at::Tensor());
}

TEST_F(KernelsCpuAutograd, Layernorm) {
  for (const bool weighted : {true, false})
    compare(
        {leaf({300, 77}), leaf({77}), leaf({77})},
        [](const auto& in) { return layernorm(in[0], in[1], in[2], 1e-5); },
        [](const auto& in) { return at::layer_norm(in[0], {77}, in[1], in[2], 1e-5); },
        weighted ? at::randn({300, 77}, at::kDouble) : at::Tensor());
}

TEST_F(KernelsCpuAutograd, LayernormAgainstFiniteDifferences) {
  // Not only ATen's word for it: central differences of a weighted sum.
  const at::Tensor x = leaf({3, 11});
  const at::Tensor w = leaf({11});
  const at::Tensor b = leaf({11});
  const at::Tensor g = at::randn({3, 11}, at::kDouble);
  (layernorm(x, w, b, 1e-5) * g).sum().backward();
  const double h = 1e-6;
  for (const auto& [input, index] : std::vector<std::pair<at::Tensor, std::int64_t>>{
           {x, 0}, {x, 17}, {x, 32}, {w, 4}, {b, 9}}) {
    at::NoGradGuard no_grad;
    auto flat = input.view({-1});
    const double saved = flat[index].item<double>();
    flat[index].fill_(saved + h);
    const double up = (layernorm(x, w, b, 1e-5) * g).sum().item<double>();
    flat[index].fill_(saved - h);
    const double down = (layernorm(x, w, b, 1e-5) * g).sum().item<double>();
    flat[index].fill_(saved);
    EXPECT_NEAR(input.grad().view({-1})[index].item<double>(), (up - down) / (2 * h), 1e-6);
  }
}

TEST_F(KernelsCpuAutograd, OutVariantsAreNotDifferentiable) {
  // Only the functional forms have an Autograd kernel: the out variants
  // write into a caller's tensor, as ATen's do.
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const char* name : {"runner::scale", "runner::bias_gelu", "runner::softmax",
                           "runner::rmsnorm", "runner::layernorm"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(dispatcher.findSchemaOrThrow(name, "").hasKernelForDispatchKey(
        c10::DispatchKey::Autograd));
    EXPECT_FALSE(dispatcher.findSchemaOrThrow(name, "out").hasKernelForDispatchKey(
        c10::DispatchKey::Autograd));
    EXPECT_TRUE(dispatcher.findSchemaOrThrow(name, "out").hasKernelForDispatchKey(
        c10::DispatchKey::CPU));
  }
}

// ------------------------------------------------------------------ argument checks

#define EXPECT_TORCH_MSG(statement, expected)                                  \
  do {                                                                         \
    bool thrown = false;                                                       \
    try {                                                                      \
      statement;                                                               \
    } catch (const c10::Error& e) {                                            \
      thrown = true;                                                           \
      EXPECT_EQ(std::string(e.what_without_backtrace()), std::string(expected)); \
    }                                                                          \
    EXPECT_TRUE(thrown) << "expected " #statement " to throw";                 \
  } while (false)

class KernelsCpuChecks : public ::testing::Test {
 public:
  void SetUp() override { load_plugin(); }
  at::Tensor x = at::randn({4, 8});
  at::Tensor v = at::randn({8});
};

TEST_F(KernelsCpuChecks, WrongDtype) {
  EXPECT_TORCH_MSG(scale(at::ones({3}, at::kLong), 2.0),
                   "runner::scale: x must be float32, float64, bfloat16 or float16, not int64");
  EXPECT_TORCH_MSG(softmax(at::ones({3}, at::kInt)),
                   "runner::softmax: x must be float32, float64, bfloat16 or float16, not int32");
  EXPECT_TORCH_MSG(bias_gelu(x, v.to(at::kDouble), "none"),
                   "runner::bias_gelu: bias must have x's dtype (float32), not float64");
  EXPECT_TORCH_MSG(rmsnorm(x.to(at::kHalf), v, 1e-6),
                   "runner::rmsnorm: weight must have x's dtype (float16), not float32");
}

TEST_F(KernelsCpuChecks, ParameterOfTheWrongLength) {
  EXPECT_TORCH_MSG(bias_gelu(x, at::randn({7}), "none"),
                   "runner::bias_gelu: bias must have shape [8] (x's last dimension), not [7]");
  EXPECT_TORCH_MSG(layernorm(x, v, at::randn({2, 4}), 1e-5),
                   "runner::layernorm: bias must have shape [8] (x's last dimension), not [2, 4]");
  EXPECT_TORCH_MSG(rmsnorm_backward(x, x, at::randn({4}), 1e-6),
                   "runner::rmsnorm_backward: weight must have shape [8] (x's last dimension), "
                   "not [4]");
}

TEST_F(KernelsCpuChecks, NotContiguous) {
  EXPECT_TORCH_MSG(softmax(x.t()), "runner::softmax: x must be contiguous (call .contiguous() first)");
  EXPECT_TORCH_MSG(bias_gelu(x, at::randn({16}).slice(0, 0, 16, 2), "none"),
                   "runner::bias_gelu: bias must be contiguous (call .contiguous() first)");
  at::Tensor out = at::empty({8, 4}).t();
  EXPECT_TORCH_MSG(layernorm_out(x, v, v, 1e-5, out),
                   "runner::layernorm: out must be contiguous (call .contiguous() first)");
  EXPECT_TORCH_MSG(softmax_backward(at::randn({8, 4}).t(), x),
                   "runner::softmax_backward: grad must be contiguous (call .contiguous() first)");
}

TEST_F(KernelsCpuChecks, OutOfTheWrongShapeOrDtype) {
  at::Tensor transposed = at::empty({8, 4});
  EXPECT_TORCH_MSG(scale_out(x, 2.0, transposed),
                   "runner::scale: out must have x's shape [4, 8], not [8, 4]");
  at::Tensor wide = at::empty({4, 8}, at::kDouble);
  EXPECT_TORCH_MSG(rmsnorm_out(x, v, 1e-6, wide),
                   "runner::rmsnorm: out must have x's dtype (float32), not float64");
  at::Tensor flat = at::empty({32});
  EXPECT_TORCH_MSG(softmax_out(x, flat), "runner::softmax: out must have x's shape [4, 8], not [32]");
}

TEST_F(KernelsCpuChecks, OutOverlappingAnInputInPart) {
  const at::Tensor buffer = at::randn({33});
  at::Tensor shifted = buffer.slice(0, 1, 33);
  EXPECT_TORCH_MSG(scale_out(buffer.slice(0, 0, 32), 2.0, shifted),
                   "runner::scale: out overlaps an input in part");
}

TEST_F(KernelsCpuChecks, UnknownApproximate) {
  EXPECT_TORCH_MSG(bias_gelu(x, v, "fast"),
                   "runner::bias_gelu: approximate must be \"none\" or \"tanh\", not \"fast\"");
  at::Tensor out = at::empty_like(x);
  EXPECT_TORCH_MSG(bias_gelu_out(x, v, "Tanh", out),
                   "runner::bias_gelu: approximate must be \"none\" or \"tanh\", not \"Tanh\"");
}

TEST_F(KernelsCpuChecks, ZeroDimensionalRowInput) {
  EXPECT_TORCH_MSG(softmax(at::randn({})),
                   "runner::softmax: x must have at least one dimension (rows over its last), not "
                   "a 0-d tensor");
  // scale has no rows: a 0-d tensor is fine.
  EXPECT_EQ(scale(at::full({}, 2.0), 3.0).item<double>(), 6.0);
}

TEST_F(KernelsCpuChecks, BackwardGradientOfTheWrongShape) {
  EXPECT_TORCH_MSG(softmax_backward(at::randn({4, 7}), x),
                   "runner::softmax_backward: grad must have y's shape [4, 8], not [4, 7]");
  EXPECT_TORCH_MSG(layernorm_backward(at::randn({4, 8}, at::kDouble), x, v, 1e-5),
                   "runner::layernorm_backward: grad must have x's dtype (float32), not float64");
}

TEST_F(KernelsCpuChecks, EmptyTensorsAreFine) {
  const at::Tensor empty = at::randn({0, 8});
  EXPECT_EQ(softmax(empty).sizes(), empty.sizes());
  EXPECT_EQ(layernorm(empty, v, v, 1e-5).sizes(), empty.sizes());
  EXPECT_EQ(scale(at::randn({0}), 2.0).numel(), 0);
}

}  // namespace
