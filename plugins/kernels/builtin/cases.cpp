// The kernel plugins of the built-in ops: one KernelCase per op (scale,
// bias_gelu, softmax, rmsnorm, layernorm) saying how the host makes inputs,
// calls the custom op and the native ATen composition it stands in for,
// computes the reference, and counts bytes and FLOPs.
// docs/kernels-builtin.md has the conventions and the tolerances' origin.
#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/rms_norm.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/softmax.h>

#include <runner/sdk.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace {

using runner::KernelCase;
using runner::KernelInputs;
using Shape = std::vector<std::int64_t>;

const std::vector<at::ScalarType> kDtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return text + "]";
}

// Every op takes a shape of rank >= 1 without empty dimensions; the row ops
// read it as rows over its last dimension.
std::string check_rows_shape(const std::string& op, const Shape& shape) {
  if (shape.empty())
    return op + " takes a shape of rank >= 1 (rows over its last dimension), not []";
  for (const auto d : shape)
    if (d <= 0) return op + " takes a shape of positive dimensions, not " + shape_text(shape);
  return "";
}

at::Tensor random(at::IntArrayRef shape, at::ScalarType dtype, const at::Device& device,
                  at::Generator& generator) {
  return at::randn(shape, generator, at::TensorOptions().dtype(dtype).device(device));
}

double bytes(const KernelInputs& inputs) {
  // Each input read once, the output (x's size) written once.
  double total = static_cast<double>(inputs.front().nbytes());
  for (const auto& t : inputs) total += static_cast<double>(t.nbytes());
  return total;
}

double elements(const KernelInputs& inputs) { return static_cast<double>(inputs[0].numel()); }
double rows_of(const KernelInputs& inputs) { return elements(inputs) / static_cast<double>(inputs[0].size(-1)); }

template <typename Signature>
c10::TypedOperatorHandle<Signature> op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

// What every case shares: dtypes, the output, bytes.
KernelCase common(std::vector<std::string> ops) {
  KernelCase c;
  c.ops = std::move(ops);
  c.dtypes = kDtypes;
  c.make_output = [](const KernelInputs& inputs) { return at::empty_like(inputs[0]); };
  c.bytes_moved = bytes;
  return c;
}

// ------------------------------------------------------------------ scale

struct ScaleOptions {
  double factor = 2.5;
};

KernelCase scale_case(const ScaleOptions& o) {
  KernelCase c = common({"runner::scale", "runner::scale.out"});
  const double s = o.factor;
  // One rounding of a product: float32's 2^-24 relative, bfloat16's 2^-9,
  // float16's 2^-11 (measured: tests/plugins/kernels/cpu_cases_test.cpp).
  c.tolerance = {{at::kFloat, 1e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 8e-3},
                 {at::kHalf, 1e-3}};
  c.check_shape = [](const Shape& shape) { return check_rows_shape("scale", shape); };
  c.make_inputs = [](const Shape& shape, at::ScalarType dtype, const at::Device& device,
                     at::Generator& generator) -> KernelInputs {
    return {random(shape, dtype, device, generator)};
  };
  const auto out_op = op<at::Tensor&(const at::Tensor&, double, at::Tensor&)>("runner::scale", "out");
  c.custom = [out_op, s](const KernelInputs& in, at::Tensor& out) { out_op.call(in[0], s, out); };
  // s as Python passes a number: a wrapped 0-dim tensor, which ATen's mul
  // treats as a scalar of x's dtype (mul.out, the vectorized kernel). The
  // Scalar overloads (mul.Scalar_out, what at::mul_out(out, x, double)
  // picks) take a slower composite path: ~5x a copy at 8192 x 8192.
  const at::Tensor factor = at::native::wrapped_scalar_tensor(s);
  c.native = [factor](const KernelInputs& in, at::Tensor& out) { at::mul_out(out, in[0], factor); };
  c.reference = [factor](const KernelInputs& in) { return in[0] * factor; };
  const auto functional = op<at::Tensor(const at::Tensor&, double)>("runner::scale");
  c.differentiable = [functional, s](const KernelInputs& in) { return functional.call(in[0], s); };
  c.grad_inputs = {0};
  c.flops = elements;  // one multiply per element
  return c;
}

// ------------------------------------------------------------------ bias_gelu

struct BiasGeluOptions {
  std::string approximate = "none";
};

KernelCase bias_gelu_case(const BiasGeluOptions& o) {
  KernelCase c = common({"runner::bias_gelu", "runner::bias_gelu.out", "runner::bias_gelu_backward"});
  const std::string approximate = o.approximate;
  c.tolerance = {{at::kFloat, 5e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 8e-3},
                 {at::kHalf, 1e-3}};
  c.grad_tolerance = {{at::kFloat, 5e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 1e-2},
                      {at::kHalf, 2e-3}};
  c.check_shape = [](const Shape& shape) { return check_rows_shape("bias_gelu", shape); };
  c.make_inputs = [](const Shape& shape, at::ScalarType dtype, const at::Device& device,
                     at::Generator& generator) -> KernelInputs {
    return {random(shape, dtype, device, generator),
            random({shape.back()}, dtype, device, generator)};
  };
  const auto out_op =
      op<at::Tensor&(const at::Tensor&, const at::Tensor&, c10::string_view, at::Tensor&)>(
          "runner::bias_gelu", "out");
  c.custom = [out_op, approximate](const KernelInputs& in, at::Tensor& out) {
    out_op.call(in[0], in[1], approximate, out);
  };
  // Two passes over the output: add, then GELU in place.
  c.native = [approximate](const KernelInputs& in, at::Tensor& out) {
    at::add_out(out, in[0], in[1]);
    at::gelu_(out, approximate);
  };
  c.reference = [approximate](const KernelInputs& in) {
    return at::gelu(in[0] + in[1], approximate);
  };
  const auto functional =
      op<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>("runner::bias_gelu");
  c.differentiable = [functional, approximate](const KernelInputs& in) {
    return functional.call(in[0], in[1], approximate);
  };
  c.grad_inputs = {0, 1};
  // The add, then GELU: exact 5 (x/sqrt2, erf, 1+, *x, *0.5), tanh 9
  // (x^3 as 2, *c, +x, *sqrt(2/pi), tanh, 1+, *x, *0.5).
  const double per_element = approximate == "tanh" ? 10.0 : 6.0;
  c.flops = [per_element](const KernelInputs& in) { return per_element * elements(in); };
  return c;
}

// ------------------------------------------------------------------ softmax

struct SoftmaxOptions {};

KernelCase softmax_case(const SoftmaxOptions&) {
  KernelCase c = common({"runner::softmax", "runner::softmax.out", "runner::softmax_backward"});
  c.tolerance = {{at::kFloat, 2e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 8e-3},
                 {at::kHalf, 1e-3}};
  c.grad_tolerance = {{at::kFloat, 5e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 1.5e-2},
                      {at::kHalf, 2e-3}};
  c.check_shape = [](const Shape& shape) { return check_rows_shape("softmax", shape); };
  c.make_inputs = [](const Shape& shape, at::ScalarType dtype, const at::Device& device,
                     at::Generator& generator) -> KernelInputs {
    return {random(shape, dtype, device, generator)};
  };
  const auto out_op =
      op<at::Tensor&(const at::Tensor&, at::Tensor&)>("runner::softmax", "out");
  c.custom = [out_op](const KernelInputs& in, at::Tensor& out) { out_op.call(in[0], out); };
  c.native = [](const KernelInputs& in, at::Tensor& out) {
    at::_softmax_out(out, in[0], -1, false);
  };
  c.reference = [](const KernelInputs& in) { return at::softmax(in[0], -1); };
  const auto functional = op<at::Tensor(const at::Tensor&)>("runner::softmax");
  c.differentiable = [functional](const KernelInputs& in) { return functional.call(in[0]); };
  c.grad_inputs = {0};
  // Per element: max, subtract, exp, add to the sum, scale by 1/sum; one
  // division per row.
  c.flops = [](const KernelInputs& in) { return 5.0 * elements(in) + rows_of(in); };
  return c;
}

// ------------------------------------------------------------------ rmsnorm

struct RmsnormOptions {
  double eps = 1e-6;
};

struct LayernormOptions {
  double eps = 1e-5;
};

KernelCase rmsnorm_case(const RmsnormOptions& o) {
  KernelCase c = common({"runner::rmsnorm", "runner::rmsnorm.out", "runner::rmsnorm_backward"});
  const double eps = o.eps;
  c.tolerance = {{at::kFloat, 2e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 8e-3},
                 {at::kHalf, 1e-3}};
  c.grad_tolerance = {{at::kFloat, 1e-5}, {at::kDouble, 1e-12}, {at::kBFloat16, 1.5e-2},
                      {at::kHalf, 3e-3}};
  c.check_shape = [](const Shape& shape) { return check_rows_shape("rmsnorm", shape); };
  c.make_inputs = [](const Shape& shape, at::ScalarType dtype, const at::Device& device,
                     at::Generator& generator) -> KernelInputs {
    return {random(shape, dtype, device, generator),
            random({shape.back()}, dtype, device, generator)};
  };
  const auto out_op =
      op<at::Tensor&(const at::Tensor&, const at::Tensor&, double, at::Tensor&)>("runner::rmsnorm",
                                                                                   "out");
  c.custom = [out_op, eps](const KernelInputs& in, at::Tensor& out) {
    out_op.call(in[0], in[1], eps, out);
  };
  // ATen has no fused rmsnorm on CPU (at::rms_norm is pow, mean, add,
  // rsqrt, mul, mul with full-size temporaries). Without temporaries of the
  // input's size: the row norms in the accumulation type, then out = x *
  // rstd and out *= weight.
  c.native = [eps](const KernelInputs& in, at::Tensor& out) {
    const at::Tensor& x = in[0];
    const auto accumulate = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const double cols = static_cast<double>(x.size(-1));
    at::Tensor rstd = at::linalg_vector_norm(x, 2, {-1}, true, accumulate);
    rstd.square_().div_(cols).add_(eps).rsqrt_();
    at::mul_out(out, x, rstd);
    out.mul_(in[1]);
  };
  c.reference = [eps](const KernelInputs& in) {
    return at::rms_norm(in[0], {in[0].size(-1)}, in[1], eps);
  };
  const auto functional =
      op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("runner::rmsnorm");
  c.differentiable = [functional, eps](const KernelInputs& in) {
    return functional.call(in[0], in[1], eps);
  };
  c.grad_inputs = {0, 1};
  // Per element: square, add, * rstd, * weight; per row: / cols, + eps, rsqrt.
  c.flops = [](const KernelInputs& in) { return 4.0 * elements(in) + 3.0 * rows_of(in); };
  return c;
}

// ------------------------------------------------------------------ layernorm

KernelCase layernorm_case(const LayernormOptions& o) {
  KernelCase c =
      common({"runner::layernorm", "runner::layernorm.out", "runner::layernorm_backward"});
  const double eps = o.eps;
  c.tolerance = {{at::kFloat, 2e-6}, {at::kDouble, 1e-12}, {at::kBFloat16, 8e-3},
                 {at::kHalf, 1e-3}};
  c.grad_tolerance = {{at::kFloat, 1e-5}, {at::kDouble, 1e-12}, {at::kBFloat16, 1.5e-2},
                      {at::kHalf, 3e-3}};
  c.check_shape = [](const Shape& shape) { return check_rows_shape("layernorm", shape); };
  c.make_inputs = [](const Shape& shape, at::ScalarType dtype, const at::Device& device,
                     at::Generator& generator) -> KernelInputs {
    return {random(shape, dtype, device, generator),
            random({shape.back()}, dtype, device, generator),
            random({shape.back()}, dtype, device, generator)};
  };
  const auto out_op = op<at::Tensor&(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                     double, at::Tensor&)>("runner::layernorm", "out");
  c.custom = [out_op, eps](const KernelInputs& in, at::Tensor& out) {
    out_op.call(in[0], in[1], in[2], eps, out);
  };
  // ATen's fused kernel, out variant; it also writes the row means and
  // 1/std (one value per row, allocated per call: 2 x rows elements).
  c.native = [eps](const KernelInputs& in, at::Tensor& out) {
    at::Tensor mean = at::empty({0}, in[0].options());
    at::Tensor rstd = at::empty({0}, in[0].options());
    at::native_layer_norm_out(out, mean, rstd, in[0], {in[0].size(-1)}, in[1], in[2], eps);
  };
  c.reference = [eps](const KernelInputs& in) {
    return at::layer_norm(in[0], {in[0].size(-1)}, in[1], in[2], eps);
  };
  const auto functional =
      op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
          "runner::layernorm");
  c.differentiable = [functional, eps](const KernelInputs& in) {
    return functional.call(in[0], in[1], in[2], eps);
  };
  c.grad_inputs = {0, 1, 2};
  // Per element: add (mean), subtract, square, add (variance), * rstd,
  // * weight, + bias; per row: two divisions, + eps, rsqrt.
  c.flops = [](const KernelInputs& in) { return 7.0 * elements(in) + 4.0 * rows_of(in); };
  return c;
}

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<ScaleOptions> scale_options;
  scale_options.field("factor", &ScaleOptions::factor, "the scale s of y = x * s");
  registrar.add_kernel("scale", "y = x * s (runner::scale): the memory-bound baseline",
                       scale_options, scale_case);

  runner::OptionBinder<BiasGeluOptions> gelu_options;
  gelu_options
      .field("approximate", &BiasGeluOptions::approximate,
             "GELU's form: \"none\" (erf) or \"tanh\" (the tanh approximation)")
      .one_of({"none", "tanh"});
  registrar.add_kernel("bias_gelu",
                       "y = gelu(x + bias), bias over the last dimension (runner::bias_gelu)",
                       gelu_options, bias_gelu_case);

  registrar.add_kernel("softmax", "softmax over the last dimension (runner::softmax)",
                       runner::OptionBinder<SoftmaxOptions>(), softmax_case);

  runner::OptionBinder<RmsnormOptions> rmsnorm_options;
  rmsnorm_options.field("eps", &RmsnormOptions::eps, "added to the mean of the squares")
      .range(0.0, std::nullopt);
  registrar.add_kernel("rmsnorm",
                       "y = x / sqrt(mean(x^2) + eps) * weight over the last dimension "
                       "(runner::rmsnorm)",
                       rmsnorm_options, rmsnorm_case);
  runner::OptionBinder<LayernormOptions> layernorm_options;
  layernorm_options.field("eps", &LayernormOptions::eps, "added to the variance")
      .range(0.0, std::nullopt);
  registrar.add_kernel("layernorm",
                       "y = (x - mean) / sqrt(var + eps) * weight + bias over the last "
                       "dimension (runner::layernorm)",
                       layernorm_options, layernorm_case);
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
