// The kernels plugin's CUDA implementations on a GPU: every op, dtype and
// shape against ATen in float64 on the CPU (computed from the same rounded
// inputs), the out variants writing every element of a NaN-poisoned output
// (and into x itself), the backward ops against ATen autograd in float64,
// the shared checks' exact messages on CUDA tensors, and tensors on a
// second device. Label gpu: every test skips without a CUDA device.
//
// Compiled in every build; nothing here has been run on a GPU by the
// authors of the kernels (see docs/kernels-cuda.md).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>
#include <torch/cuda.h>

#include <runner/host/host.hpp>

#if defined(RUNNER_WITH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace {

const std::filesystem::path kPlugin =
    std::filesystem::path(RUNNER_BINARY_DIR) / "lib/runner/plugins/runner_plugin_kernels.so";

constexpr double kEps = 1e-5;
const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};

// Rows of 1 .. 100000 columns: vector tails (7, 33), the warp/block switch
// (1024 | 1025), rows longer than a block's pass (4097, 100000), one and many
// rows, a 3-D tensor, and more rows than a warp-per-row grid holds (40000).
const std::vector<std::vector<std::int64_t>> kShapes = {
    {1, 1},    {1, 7},    {37, 7},   {5, 33},     {1, 1000},    {65, 1000},
    {3, 1024}, {3, 1025}, {3, 4097}, {2, 100000}, {2, 3, 33},   {40000, 7}};

/// Largest error relative to the reference's largest magnitude; infinite
/// when `got` holds a NaN or inf the reference does not (an unwritten
/// element of a poisoned output).
double relative_error(const at::Tensor& got, const at::Tensor& ref) {
  const at::Tensor g = got.to(at::kCPU).to(at::kDouble);
  EXPECT_EQ(g.sizes(), ref.sizes());
  if (ref.numel() == 0) return 0;
  if (!g.isfinite().all().item<bool>()) return std::numeric_limits<double>::infinity();
  const double scale = std::max(ref.abs().max().item<double>(), 1e-30);
  return (g - ref).abs().max().item<double>() / scale;
}

double tolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble: return 1e-12;
    case at::kFloat: return 1e-5;
    case at::kHalf: return 4e-3;
    default: return 1.6e-2;  // bfloat16: 8 significant bits
  }
}

double grad_tolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble: return 1e-10;
    case at::kFloat: return 1e-4;
    case at::kHalf: return 5e-3;
    default: return 3e-2;
  }
}

std::string describe(at::ScalarType dtype, at::IntArrayRef shape) {
  std::string s = std::string(c10::toString(dtype)) + " [";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

at::Tensor random_on_gpu(at::IntArrayRef shape, at::ScalarType dtype, double spread = 1.0) {
  return (at::randn(shape, at::TensorOptions().dtype(at::kDouble)) * spread)
      .to(at::TensorOptions().dtype(dtype).device(at::kCUDA));
}

/// The float64 CPU copy of a (rounded) input: what the reference computes on.
at::Tensor exact(const at::Tensor& t) { return t.to(at::kCPU).to(at::kDouble); }

at::Tensor poisoned_like(const at::Tensor& t) {
  return at::full_like(t, std::numeric_limits<double>::quiet_NaN());
}

// --- the ops, through the dispatcher ------------------------------------------------------

c10::OperatorHandle op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

at::Tensor scale(const at::Tensor& x, double s) {
  return op("runner::scale").typed<at::Tensor(const at::Tensor&, double)>().call(x, s);
}
at::Tensor& scale_out(const at::Tensor& x, double s, at::Tensor& out) {
  return op("runner::scale", "out")
      .typed<at::Tensor&(const at::Tensor&, double, at::Tensor&)>()
      .call(x, s, out);
}
at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& b, c10::string_view approximate) {
  return op("runner::bias_gelu")
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>()
      .call(x, b, approximate);
}
at::Tensor& bias_gelu_out(const at::Tensor& x, const at::Tensor& b, c10::string_view approximate,
                          at::Tensor& out) {
  return op("runner::bias_gelu", "out")
      .typed<at::Tensor&(const at::Tensor&, const at::Tensor&, c10::string_view, at::Tensor&)>()
      .call(x, b, approximate, out);
}
at::Tensor bias_gelu_backward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& b,
                              c10::string_view approximate) {
  return op("runner::bias_gelu_backward")
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                        c10::string_view)>()
      .call(g, x, b, approximate);
}
at::Tensor softmax(const at::Tensor& x) {
  return op("runner::softmax").typed<at::Tensor(const at::Tensor&)>().call(x);
}
at::Tensor& softmax_out(const at::Tensor& x, at::Tensor& out) {
  return op("runner::softmax", "out")
      .typed<at::Tensor&(const at::Tensor&, at::Tensor&)>()
      .call(x, out);
}
at::Tensor softmax_backward(const at::Tensor& g, const at::Tensor& y) {
  return op("runner::softmax_backward")
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>()
      .call(g, y);
}
at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  return op("runner::rmsnorm")
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>()
      .call(x, w, eps);
}
at::Tensor& rmsnorm_out(const at::Tensor& x, const at::Tensor& w, double eps, at::Tensor& out) {
  return op("runner::rmsnorm", "out")
      .typed<at::Tensor&(const at::Tensor&, const at::Tensor&, double, at::Tensor&)>()
      .call(x, w, eps, out);
}
std::tuple<at::Tensor, at::Tensor> rmsnorm_backward(const at::Tensor& g, const at::Tensor& x,
                                                    const at::Tensor& w, double eps) {
  return op("runner::rmsnorm_backward")
      .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                const at::Tensor&, double)>()
      .call(g, x, w, eps);
}
at::Tensor layernorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return op("runner::layernorm")
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>()
      .call(x, w, b, eps);
}
at::Tensor& layernorm_out(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                          double eps, at::Tensor& out) {
  return op("runner::layernorm", "out")
      .typed<at::Tensor&(const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                         at::Tensor&)>()
      .call(x, w, b, eps, out);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward(const at::Tensor& g,
                                                                  const at::Tensor& x,
                                                                  const at::Tensor& w,
                                                                  double eps) {
  return op("runner::layernorm_backward")
      .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
          const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>()
      .call(g, x, w, eps);
}

// --- float64 references -------------------------------------------------------------------

at::Tensor rmsnorm_reference(const at::Tensor& x, const at::Tensor& w, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

/// Gradients of sum(f(inputs) * g) with respect to `inputs`, in float64.
template <typename F>
std::vector<at::Tensor> reference_grads(std::vector<at::Tensor> inputs, const at::Tensor& g, F f) {
  for (auto& t : inputs) t = exact(t).requires_grad_(true);
  const at::Tensor y = f(inputs);
  return torch::autograd::grad({y}, inputs, {exact(g)});
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    static runner::PluginHost* host = [] {
      auto* h = new runner::PluginHost();  // plugin libraries stay loaded
      h->load(kPlugin);
      return h;
    }();
    (void)host;
    at::manual_seed(0);
  }
};

// --- forward: functional and out ---------------------------------------------------------------

TEST_F(CudaKernels, ScaleMatchesFloat64) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype);
      const at::Tensor ref = exact(x) * -1.75;
      EXPECT_LE(relative_error(scale(x, -1.75), ref), tolerance(dtype));
      at::Tensor out = poisoned_like(x);
      scale_out(x, -1.75, out);
      EXPECT_LE(relative_error(out, ref), tolerance(dtype));
    }
  }
}

TEST_F(CudaKernels, ScaleCoversLongAndMisalignedTensors) {
  // More vectors than the grid has threads (grid-stride loop) with an odd
  // tail, and tensors starting 1 element past an aligned address (scalar path).
  for (const auto dtype : kDtypes) {
    SCOPED_TRACE(describe(dtype, {}));
    const at::Tensor big = random_on_gpu({5'000'001}, dtype);
    EXPECT_LE(relative_error(scale(big, 3.0), exact(big) * 3.0), tolerance(dtype));
    const at::Tensor base = random_on_gpu({1001}, dtype);
    const at::Tensor x = base.narrow(0, 1, 1000);
    ASSERT_TRUE(x.is_contiguous());
    at::Tensor out_base = poisoned_like(base);
    at::Tensor out = out_base.narrow(0, 1, 1000);
    scale_out(x, 0.5, out);
    EXPECT_LE(relative_error(out, exact(x) * 0.5), tolerance(dtype));
    EXPECT_TRUE(std::isnan(out_base[0].item<double>())) << "wrote before out's first element";
  }
}

TEST_F(CudaKernels, BiasGeluMatchesFloat64) {
  for (const char* approximate : {"none", "tanh"}) {
    for (const auto dtype : kDtypes) {
      for (const auto& shape : kShapes) {
        SCOPED_TRACE(describe(dtype, shape) + " " + approximate);
        const at::Tensor x = random_on_gpu(shape, dtype, 2.0);
        const at::Tensor b = random_on_gpu({shape.back()}, dtype);
        const at::Tensor ref = at::gelu(exact(x) + exact(b), approximate);
        EXPECT_LE(relative_error(bias_gelu(x, b, approximate), ref), tolerance(dtype));
        at::Tensor out = poisoned_like(x);
        bias_gelu_out(x, b, approximate, out);
        EXPECT_LE(relative_error(out, ref), tolerance(dtype));
      }
    }
  }
}

TEST_F(CudaKernels, BiasGeluOnMisalignedRows) {
  // x one element past an aligned address: the scalar path, whose column
  // bookkeeping must still follow the rows.
  for (const auto dtype : kDtypes) {
    SCOPED_TRACE(describe(dtype, {}));
    const at::Tensor base = random_on_gpu({1 + 300 * 64}, dtype);
    const at::Tensor x = base.narrow(0, 1, 300 * 64).view({300, 64});
    const at::Tensor b = random_on_gpu({64}, dtype);
    const at::Tensor ref = at::gelu(exact(x) + exact(b));
    EXPECT_LE(relative_error(bias_gelu(x, b, "none"), ref), tolerance(dtype));
  }
}

TEST_F(CudaKernels, SoftmaxMatchesFloat64) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype, 3.0);
      const at::Tensor ref = at::softmax(exact(x), -1);
      EXPECT_LE(relative_error(softmax(x), ref), tolerance(dtype));
      at::Tensor out = poisoned_like(x);
      softmax_out(x, out);
      EXPECT_LE(relative_error(out, ref), tolerance(dtype));
    }
  }
}

TEST_F(CudaKernels, SoftmaxIsStableAndHandlesMaskedPositions) {
  // Values whose exp overflows float, and rows starting with -inf.
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(describe(dtype, {}));
    const at::Tensor big = random_on_gpu({4, 2000}, dtype) + 1000.0;
    EXPECT_LE(relative_error(softmax(big), at::softmax(exact(big), -1)), tolerance(dtype));
    at::Tensor masked = random_on_gpu({6, 40}, dtype);
    masked.narrow(1, 0, 17).fill_(-std::numeric_limits<double>::infinity());
    EXPECT_LE(relative_error(softmax(masked), at::softmax(exact(masked), -1)), tolerance(dtype));
  }
}

TEST_F(CudaKernels, RmsnormMatchesFloat64) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype);
      const at::Tensor w = random_on_gpu({shape.back()}, dtype);
      const at::Tensor ref = rmsnorm_reference(exact(x), exact(w), kEps);
      EXPECT_LE(relative_error(rmsnorm(x, w, kEps), ref), tolerance(dtype));
      at::Tensor out = poisoned_like(x);
      rmsnorm_out(x, w, kEps, out);
      EXPECT_LE(relative_error(out, ref), tolerance(dtype));
    }
  }
}

TEST_F(CudaKernels, LayernormMatchesFloat64) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      // An offset mean: the variance must not come from E[x^2] - E[x]^2.
      const at::Tensor x = random_on_gpu(shape, dtype) + 20.0;
      const at::Tensor w = random_on_gpu({shape.back()}, dtype);
      const at::Tensor b = random_on_gpu({shape.back()}, dtype);
      const at::Tensor ref =
          at::layer_norm(exact(x), {shape.back()}, exact(w), exact(b), kEps);
      EXPECT_LE(relative_error(layernorm(x, w, b, kEps), ref), tolerance(dtype));
      at::Tensor out = poisoned_like(x);
      layernorm_out(x, w, b, kEps, out);
      EXPECT_LE(relative_error(out, ref), tolerance(dtype));
    }
  }
}

TEST_F(CudaKernels, RowKernelsLoopPastTheGrid) {
  // More block-per-row rows than the grid holds (64 blocks per SM).
  const at::Tensor x = random_on_gpu({20000, 1100}, at::kFloat);
  const at::Tensor w = random_on_gpu({1100}, at::kFloat);
  const at::Tensor b = random_on_gpu({1100}, at::kFloat);
  EXPECT_LE(relative_error(softmax(x), at::softmax(exact(x), -1)), 1e-5);
  EXPECT_LE(relative_error(rmsnorm(x, w, kEps), rmsnorm_reference(exact(x), exact(w), kEps)),
            1e-5);
  EXPECT_LE(relative_error(layernorm(x, w, b, kEps),
                           at::layer_norm(exact(x), {1100}, exact(w), exact(b), kEps)),
            1e-5);
}

TEST_F(CudaKernels, OutVariantsMayWriteIntoX) {
  // The shared check allows out to be x itself: every element is read before
  // it is written.
  for (const auto dtype : kDtypes) {
    for (const auto& shape : {std::vector<std::int64_t>{9, 33},
                              std::vector<std::int64_t>{3, 4097}}) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor w = random_on_gpu({shape.back()}, dtype);
      const at::Tensor b = random_on_gpu({shape.back()}, dtype);
      at::Tensor x = random_on_gpu(shape, dtype);
      at::Tensor ref = exact(x) * 2.0;
      scale_out(x, 2.0, x);
      EXPECT_LE(relative_error(x, ref), tolerance(dtype));
      ref = at::gelu(exact(x) + exact(b));
      bias_gelu_out(x, b, "none", x);
      EXPECT_LE(relative_error(x, ref), tolerance(dtype));
      ref = at::softmax(exact(x), -1);
      softmax_out(x, x);
      EXPECT_LE(relative_error(x, ref), tolerance(dtype));
      ref = rmsnorm_reference(exact(x), exact(w), kEps);
      rmsnorm_out(x, w, kEps, x);
      EXPECT_LE(relative_error(x, ref), tolerance(dtype));
      ref = at::layer_norm(exact(x), {shape.back()}, exact(w), exact(b), kEps);
      layernorm_out(x, w, b, kEps, x);
      EXPECT_LE(relative_error(x, ref), tolerance(dtype));
    }
  }
}

TEST_F(CudaKernels, EmptyTensorsLaunchNothing) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : {std::vector<std::int64_t>{0, 7}, std::vector<std::int64_t>{3, 0}}) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype);
      const at::Tensor w = random_on_gpu({shape.back()}, dtype);
      EXPECT_EQ(scale(x, 2.0).sizes(), x.sizes());
      EXPECT_EQ(softmax(x).sizes(), x.sizes());
      EXPECT_EQ(bias_gelu(x, w, "none").sizes(), x.sizes());
      EXPECT_EQ(rmsnorm(x, w, kEps).sizes(), x.sizes());
      EXPECT_EQ(layernorm(x, w, w, kEps).sizes(), x.sizes());
      const auto [dx, dw] = rmsnorm_backward(x, x, w, kEps);
      EXPECT_EQ(dx.sizes(), x.sizes());
      // A gradient summed over no rows is zero.
      EXPECT_EQ(dw.count_nonzero().item<std::int64_t>(), 0);
      const auto [lx, lw, lb] = layernorm_backward(x, x, w, kEps);
      EXPECT_EQ(lw.count_nonzero().item<std::int64_t>(), 0);
      EXPECT_EQ(lb.count_nonzero().item<std::int64_t>(), 0);
      EXPECT_EQ(lw.sizes(), w.sizes());
    }
  }
}

// --- backward -----------------------------------------------------------------------------

TEST_F(CudaKernels, BiasGeluBackwardMatchesAutograd) {
  for (const char* approximate : {"none", "tanh"}) {
    for (const auto dtype : kDtypes) {
      for (const auto& shape : kShapes) {
        SCOPED_TRACE(describe(dtype, shape) + " " + approximate);
        const at::Tensor x = random_on_gpu(shape, dtype, 2.0);
        const at::Tensor b = random_on_gpu({shape.back()}, dtype);
        const at::Tensor g = random_on_gpu(shape, dtype);
        const auto ref = reference_grads({x, b}, g, [&](const std::vector<at::Tensor>& in) {
          return at::gelu(in[0] + in[1], approximate);
        });
        EXPECT_LE(relative_error(bias_gelu_backward(g, x, b, approximate), ref[0]),
                  grad_tolerance(dtype));
      }
    }
  }
}

TEST_F(CudaKernels, SoftmaxBackwardMatchesAutograd) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype, 3.0);
      const at::Tensor g = random_on_gpu(shape, dtype);
      const auto ref = reference_grads(
          {x}, g, [](const std::vector<at::Tensor>& in) { return at::softmax(in[0], -1); });
      // The op takes y = softmax(x): the kernel's own (rounded) output.
      EXPECT_LE(relative_error(softmax_backward(g, softmax(x)), ref[0]), grad_tolerance(dtype));
    }
  }
}

TEST_F(CudaKernels, RmsnormBackwardMatchesAutograd) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype);
      const at::Tensor w = random_on_gpu({shape.back()}, dtype);
      const at::Tensor g = random_on_gpu(shape, dtype);
      const auto ref = reference_grads({x, w}, g, [](const std::vector<at::Tensor>& in) {
        return rmsnorm_reference(in[0], in[1], kEps);
      });
      const auto [dx, dw] = rmsnorm_backward(g, x, w, kEps);
      EXPECT_LE(relative_error(dx, ref[0]), grad_tolerance(dtype)) << "dx";
      EXPECT_LE(relative_error(dw, ref[1]), grad_tolerance(dtype)) << "dweight";
    }
  }
}

TEST_F(CudaKernels, LayernormBackwardMatchesAutograd) {
  for (const auto dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      const at::Tensor x = random_on_gpu(shape, dtype) + 5.0;
      const at::Tensor w = random_on_gpu({shape.back()}, dtype);
      const at::Tensor b = random_on_gpu({shape.back()}, dtype);
      const at::Tensor g = random_on_gpu(shape, dtype);
      const std::int64_t cols = shape.back();
      const auto ref = reference_grads({x, w, b}, g, [cols](const std::vector<at::Tensor>& in) {
        return at::layer_norm(in[0], {cols}, in[1], in[2], kEps);
      });
      const auto [dx, dw, db] = layernorm_backward(g, x, w, kEps);
      EXPECT_LE(relative_error(dx, ref[0]), grad_tolerance(dtype)) << "dx";
      EXPECT_LE(relative_error(dw, ref[1]), grad_tolerance(dtype)) << "dweight";
      EXPECT_LE(relative_error(db, ref[2]), grad_tolerance(dtype)) << "dbias";
    }
  }
}

TEST_F(CudaKernels, WeightGradientsOverManyRowChunks) {
  // Narrow rows and many of them: several row chunks per column, summed by
  // the second pass.
  const at::Tensor x = random_on_gpu({50000, 33}, at::kDouble);
  const at::Tensor w = random_on_gpu({33}, at::kDouble);
  const at::Tensor b = random_on_gpu({33}, at::kDouble);
  const at::Tensor g = random_on_gpu({50000, 33}, at::kDouble);
  const auto ref = reference_grads({x, w, b}, g, [](const std::vector<at::Tensor>& in) {
    return at::layer_norm(in[0], {33}, in[1], in[2], kEps);
  });
  const auto [dx, dw, db] = layernorm_backward(g, x, w, kEps);
  EXPECT_LE(relative_error(dw, ref[1]), 1e-10);
  EXPECT_LE(relative_error(db, ref[2]), 1e-10);
  const auto rms_ref = reference_grads({x, w}, g, [](const std::vector<at::Tensor>& in) {
    return rmsnorm_reference(in[0], in[1], kEps);
  });
  EXPECT_LE(relative_error(std::get<1>(rmsnorm_backward(g, x, w, kEps)), rms_ref[1]), 1e-10);
}

TEST_F(CudaKernels, AutogradReachesTheCudaBackwards) {
  // The functional ops through autograd (ops.cpp's Autograd kernels, shared
  // with the CPU) on CUDA tensors, in float64.
  const at::Tensor x0 = random_on_gpu({6, 50}, at::kDouble);
  const at::Tensor w0 = random_on_gpu({50}, at::kDouble);
  const at::Tensor b0 = random_on_gpu({50}, at::kDouble);
  const at::Tensor g = random_on_gpu({6, 50}, at::kDouble);
  {
    const at::Tensor x = x0.clone().requires_grad_(true);
    const at::Tensor w = w0.clone().requires_grad_(true);
    const at::Tensor b = b0.clone().requires_grad_(true);
    layernorm(x, w, b, kEps).backward(g);
    const auto ref = reference_grads({x0, w0, b0}, g, [](const std::vector<at::Tensor>& in) {
      return at::layer_norm(in[0], {50}, in[1], in[2], kEps);
    });
    EXPECT_LE(relative_error(x.grad(), ref[0]), 1e-10);
    EXPECT_LE(relative_error(w.grad(), ref[1]), 1e-10);
    EXPECT_LE(relative_error(b.grad(), ref[2]), 1e-10);
  }
  {
    const at::Tensor x = x0.clone().requires_grad_(true);
    softmax(x).backward(g);
    const auto ref = reference_grads(
        {x0}, g, [](const std::vector<at::Tensor>& in) { return at::softmax(in[0], -1); });
    EXPECT_LE(relative_error(x.grad(), ref[0]), 1e-10);
  }
  {
    const at::Tensor x = x0.clone().requires_grad_(true);
    const at::Tensor b = b0.clone().requires_grad_(true);
    bias_gelu(x, b, "tanh").backward(g);
    const auto ref = reference_grads({x0, b0}, g, [](const std::vector<at::Tensor>& in) {
      return at::gelu(in[0] + in[1], "tanh");
    });
    EXPECT_LE(relative_error(x.grad(), ref[0]), 1e-10);
    EXPECT_LE(relative_error(b.grad(), ref[1]), 1e-10);
  }
}

// --- the shared checks on CUDA tensors ----------------------------------------------------

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.msg();
  }
  return "(no error)";
}

TEST_F(CudaKernels, CudaTensorsAreRefusedWithTheSharedMessages) {
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  const at::Tensor x = at::randn({4, 33}, cuda);
  const at::Tensor w = at::randn({33}, cuda);
  EXPECT_EQ(error_of([&] { softmax(at::ones({4, 33}, cuda.dtype(at::kInt))); }),
            "runner::softmax: x must be float32, float64, bfloat16 or float16, not int32");
  EXPECT_EQ(error_of([&] { scale(x.t(), 2.0); }),
            "runner::scale: x must be contiguous (call .contiguous() first)");
  EXPECT_EQ(error_of([&] { rmsnorm(x, at::randn({33}), kEps); }),
            "runner::rmsnorm: weight must be on x's device (cuda:0), not cpu");
  EXPECT_EQ(error_of([&] { layernorm(x, w, at::randn({32}, cuda), kEps); }),
            "runner::layernorm: bias must have shape [33] (x's last dimension), not [32]");
  EXPECT_EQ(error_of([&] { rmsnorm(x, w.to(at::kDouble), kEps); }),
            "runner::rmsnorm: weight must have x's dtype (float32), not float64");
  at::Tensor out = at::empty({4, 32}, cuda);
  EXPECT_EQ(error_of([&] { softmax_out(x, out); }),
            "runner::softmax: out must have x's shape [4, 33], not [4, 32]");
  EXPECT_EQ(error_of([&] { bias_gelu(x, w, "fast"); }),
            "runner::bias_gelu: approximate must be \"none\" or \"tanh\", not \"fast\"");
  EXPECT_EQ(error_of([&] { softmax_backward(at::randn({4, 32}, cuda), x); }),
            "runner::softmax_backward: grad must have y's shape [4, 33], not [4, 32]");
  // And exactly the CPU implementation's message for the same input.
  EXPECT_EQ(error_of([&] { scale(x.t(), 2.0); }),
            error_of([&] { scale(x.cpu().t(), 2.0); }));
}

TEST_F(CudaKernels, TensorsOnASecondDeviceRunThere) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  const auto on1 = at::TensorOptions().device(at::Device(at::kCUDA, 1));
  const at::Tensor x = at::randn({70, 1000}, on1);
  const at::Tensor w = at::randn({1000}, on1);
  const at::Tensor b = at::randn({1000}, on1);
  const at::Tensor g = at::randn({70, 1000}, on1);
  // cuda:0 stays current: the ops switch to their tensors' device themselves.
  const at::Tensor y = layernorm(x, w, b, kEps);
  EXPECT_EQ(y.device(), x.device());
  EXPECT_LE(relative_error(y, at::layer_norm(exact(x), {1000}, exact(w), exact(b), kEps)), 1e-5);
  EXPECT_LE(relative_error(softmax(x), at::softmax(exact(x), -1)), 1e-5);
  EXPECT_LE(relative_error(scale(x, 2.0), exact(x) * 2.0), 1e-6);
  const auto [dx, dw] = rmsnorm_backward(g, x, w, kEps);
  EXPECT_EQ(dw.device(), x.device());
  const auto ref = reference_grads({x, w}, g, [](const std::vector<at::Tensor>& in) {
    return rmsnorm_reference(in[0], in[1], kEps);
  });
  EXPECT_LE(relative_error(dx, ref[0]), 1e-4);
  EXPECT_LE(relative_error(dw, ref[1]), 1e-4);
#if defined(RUNNER_WITH_CUDA)
  EXPECT_EQ(c10::cuda::current_device(), 0) << "an op left its device current";
#endif
}

}  // namespace
