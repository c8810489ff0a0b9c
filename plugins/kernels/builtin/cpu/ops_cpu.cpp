// The CPU implementations of the runner::* ops: the shared checks, then
// the kernels of the instruction set ATen runs (kernels.hpp). The functional
// forms allocate their output and run the out variant's kernel.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "../ops.hpp"
#include "kernels.hpp"

namespace runner_kernels::cpu {

namespace {

// The checks admit only these four dtypes.
Dtype dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return Dtype::float64;
    case at::kBFloat16: return Dtype::bfloat16;
    case at::kHalf: return Dtype::float16;
    default: return Dtype::float32;
  }
}

at::Tensor fresh(const at::Tensor& like) {
  return at::empty_like(like, at::MemoryFormat::Contiguous);
}

const void* in(const at::Tensor& t) { return t.const_data_ptr(); }
void* out_of(at::Tensor& t) { return t.mutable_data_ptr(); }

void run_scale(const at::Tensor& x, double s, at::Tensor& out) {
  selected().scale(dtype_of(x), in(x), out_of(out), x.numel(), s);
}

at::Tensor& scale_out(const at::Tensor& x, double s, at::Tensor& out) {
  check_scale(x, out);
  run_scale(x, s, out);
  return out;
}

at::Tensor scale(const at::Tensor& x, double s) {
  check_scale(x, at::Tensor());
  at::Tensor out = fresh(x);
  run_scale(x, s, out);
  return out;
}

void run_bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh, const Rows& r,
                   at::Tensor& out) {
  selected().bias_gelu(dtype_of(x), in(x), in(bias), out_of(out), r.rows, r.cols, tanh);
}

at::Tensor& bias_gelu_out(const at::Tensor& x, const at::Tensor& bias,
                          c10::string_view approximate, at::Tensor& out) {
  const Rows r = check_bias_gelu(x, bias, out);
  run_bias_gelu(x, bias, tanh_approximation(approximate), r, out);
  return out;
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
  const Rows r = check_bias_gelu(x, bias, at::Tensor());
  const bool tanh = tanh_approximation(approximate);
  at::Tensor out = fresh(x);
  run_bias_gelu(x, bias, tanh, r, out);
  return out;
}

at::Tensor bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& bias,
                              c10::string_view approximate) {
  const Rows r = check_bias_gelu_backward(grad, x, bias);
  const bool tanh = tanh_approximation(approximate);
  at::Tensor dx = fresh(x);
  selected().bias_gelu_backward(dtype_of(x), in(grad), in(x), in(bias), out_of(dx), r.rows,
                                r.cols, tanh);
  return dx;
}

at::Tensor& softmax_out(const at::Tensor& x, at::Tensor& out) {
  const Rows r = check_softmax(x, out);
  selected().softmax(dtype_of(x), in(x), out_of(out), r.rows, r.cols);
  return out;
}

at::Tensor softmax(const at::Tensor& x) {
  const Rows r = check_softmax(x, at::Tensor());
  at::Tensor out = fresh(x);
  selected().softmax(dtype_of(x), in(x), out_of(out), r.rows, r.cols);
  return out;
}

at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& y) {
  const Rows r = check_softmax_backward(grad, y);
  at::Tensor dx = fresh(y);
  selected().softmax_backward(dtype_of(y), in(grad), in(y), out_of(dx), r.rows, r.cols);
  return dx;
}

at::Tensor& rmsnorm_out(const at::Tensor& x, const at::Tensor& weight, double eps,
                        at::Tensor& out) {
  const Rows r = check_rmsnorm(x, weight, out);
  selected().rmsnorm(dtype_of(x), in(x), in(weight), out_of(out), r.rows, r.cols, eps);
  return out;
}

at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const Rows r = check_rmsnorm(x, weight, at::Tensor());
  at::Tensor out = fresh(x);
  selected().rmsnorm(dtype_of(x), in(x), in(weight), out_of(out), r.rows, r.cols, eps);
  return out;
}

std::tuple<at::Tensor, at::Tensor> rmsnorm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                    const at::Tensor& weight, double eps) {
  const Rows r = check_rmsnorm_backward(grad, x, weight);
  at::Tensor dx = fresh(x);
  at::Tensor dweight = fresh(weight);
  selected().rmsnorm_backward(dtype_of(x), in(grad), in(x), in(weight), out_of(dx),
                              out_of(dweight), r.rows, r.cols, eps);
  return {dx, dweight};
}

at::Tensor& layernorm_out(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          double eps, at::Tensor& out) {
  const Rows r = check_layernorm(x, weight, bias, out);
  selected().layernorm(dtype_of(x), in(x), in(weight), in(bias), out_of(out), r.rows, r.cols,
                       eps);
  return out;
}

at::Tensor layernorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     double eps) {
  const Rows r = check_layernorm(x, weight, bias, at::Tensor());
  at::Tensor out = fresh(x);
  selected().layernorm(dtype_of(x), in(x), in(weight), in(bias), out_of(out), r.rows, r.cols,
                       eps);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward(const at::Tensor& grad,
                                                                  const at::Tensor& x,
                                                                  const at::Tensor& weight,
                                                                  double eps) {
  const Rows r = check_layernorm_backward(grad, x, weight);
  at::Tensor dx = fresh(x);
  at::Tensor dweight = fresh(weight);
  at::Tensor dbias = fresh(weight);
  selected().layernorm_backward(dtype_of(x), in(grad), in(x), in(weight), out_of(dx),
                                out_of(dweight), out_of(dbias), r.rows, r.cols, eps);
  return {dx, dweight, dbias};
}

// Which instruction set the CPU kernels run: "default", "avx2" or "avx512".
std::string cpu_capability() { return selected().capability; }

}  // namespace

}  // namespace runner_kernels::cpu

TORCH_LIBRARY_FRAGMENT(runner, m) {
  // A debug op without tensors (so without a device): the tests check with
  // it that ATEN_CPU_CAPABILITY chose the kernels they mean to test.
  m.def("_cpu_capability() -> str", &runner_kernels::cpu::cpu_capability);
}

TORCH_LIBRARY_IMPL(runner, CPU, m) {
  namespace k = runner_kernels::cpu;
  m.impl("scale", &k::scale);
  m.impl("scale.out", &k::scale_out);
  m.impl("bias_gelu", &k::bias_gelu);
  m.impl("bias_gelu.out", &k::bias_gelu_out);
  m.impl("bias_gelu_backward", &k::bias_gelu_backward);
  m.impl("softmax", &k::softmax);
  m.impl("softmax.out", &k::softmax_out);
  m.impl("softmax_backward", &k::softmax_backward);
  m.impl("rmsnorm", &k::rmsnorm);
  m.impl("rmsnorm.out", &k::rmsnorm_out);
  m.impl("rmsnorm_backward", &k::rmsnorm_backward);
  m.impl("layernorm", &k::layernorm);
  m.impl("layernorm.out", &k::layernorm_out);
  m.impl("layernorm_backward", &k::layernorm_backward);
}
