// The CUDA implementations of the runner ops (ops.hpp), registered for the
// CUDA dispatch key: the torch side of the kernels in this folder. Each
// implementation runs the shared argument check first (the CPU and CUDA ops
// refuse the same inputs with the same message), makes the tensors' device
// current (inputs on cuda:1 work while cuda:0 is current), allocates what it
// returns and its workspaces through the caching allocator, and launches on
// the device's current stream; a launch error becomes a c10::Error.
// Autograd is registered once for both devices (ops.cpp); it reaches these
// implementations by redispatching below autograd.
#include "../ops.hpp"
#include "launch.hpp"

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>

namespace runner_kernels::cuda {
namespace {

DType dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::float32;
    case at::kDouble: return DType::float64;
    case at::kBFloat16: return DType::bfloat16;
    case at::kHalf: return DType::float16;
    default: break;
  }
  // The shared checks refuse every other dtype before this is reached.
  TORCH_INTERNAL_ASSERT(false, "runner CUDA kernels: unexpected dtype ", t.scalar_type());
}

/// The current stream and multiprocessor count of the current device (the
/// caller holds a CUDAGuard for the tensors' device).
Launch launch_here() {
  const c10::DeviceIndex device = c10::cuda::current_device();
  Launch launch;
  launch.stream = c10::cuda::getCurrentCUDAStream(device).stream();
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&launch.sm_count, cudaDevAttrMultiProcessorCount, device));
  return launch;
}

/// A fresh contiguous tensor of t's shape, dtype and device.
at::Tensor empty_as(const at::Tensor& t) { return at::empty(t.sizes(), t.options()); }

// --- scale ------------------------------------------------------------------------------

void run_scale(const at::Tensor& x, double s, at::Tensor& out) {
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  C10_CUDA_CHECK(scale(dtype_of(x), x.const_data_ptr(), s, out.mutable_data_ptr(), x.numel(),
                       launch_here()));
}

at::Tensor scale_functional(const at::Tensor& x, double s) {
  check_scale(x, at::Tensor());
  at::Tensor out = empty_as(x);
  run_scale(x, s, out);
  return out;
}

at::Tensor& scale_out(const at::Tensor& x, double s, at::Tensor& out) {
  check_scale(x, out);
  run_scale(x, s, out);
  return out;
}

// --- bias_gelu --------------------------------------------------------------------------

void run_bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh, Rows shape,
                   at::Tensor& out) {
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  C10_CUDA_CHECK(bias_gelu(dtype_of(x), x.const_data_ptr(), bias.const_data_ptr(),
                           out.mutable_data_ptr(), shape.rows, shape.cols, tanh, launch_here()));
}

at::Tensor bias_gelu_functional(const at::Tensor& x, const at::Tensor& bias,
                                c10::string_view approximate) {
  const Rows shape = check_bias_gelu(x, bias, at::Tensor());
  const bool tanh = tanh_approximation(approximate);
  at::Tensor out = empty_as(x);
  run_bias_gelu(x, bias, tanh, shape, out);
  return out;
}

at::Tensor& bias_gelu_out(const at::Tensor& x, const at::Tensor& bias,
                          c10::string_view approximate, at::Tensor& out) {
  const Rows shape = check_bias_gelu(x, bias, out);
  run_bias_gelu(x, bias, tanh_approximation(approximate), shape, out);
  return out;
}

at::Tensor bias_gelu_backward_cuda(const at::Tensor& grad, const at::Tensor& x,
                                   const at::Tensor& bias, c10::string_view approximate) {
  const Rows shape = check_bias_gelu_backward(grad, x, bias);
  const bool tanh = tanh_approximation(approximate);
  at::Tensor dx = empty_as(x);
  if (x.numel() == 0) return dx;
  const c10::cuda::CUDAGuard guard(x.device());
  C10_CUDA_CHECK(bias_gelu_backward(dtype_of(x), grad.const_data_ptr(), x.const_data_ptr(),
                                    bias.const_data_ptr(), dx.mutable_data_ptr(), shape.rows,
                                    shape.cols, tanh, launch_here()));
  return dx;
}

// --- softmax ----------------------------------------------------------------------------

void run_softmax(const at::Tensor& x, Rows shape, at::Tensor& out) {
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  C10_CUDA_CHECK(softmax(dtype_of(x), x.const_data_ptr(), out.mutable_data_ptr(), shape.rows,
                         shape.cols, launch_here()));
}

at::Tensor softmax_functional(const at::Tensor& x) {
  const Rows shape = check_softmax(x, at::Tensor());
  at::Tensor out = empty_as(x);
  run_softmax(x, shape, out);
  return out;
}

at::Tensor& softmax_out(const at::Tensor& x, at::Tensor& out) {
  run_softmax(x, check_softmax(x, out), out);
  return out;
}

at::Tensor softmax_backward_cuda(const at::Tensor& grad, const at::Tensor& y) {
  const Rows shape = check_softmax_backward(grad, y);
  at::Tensor dx = empty_as(y);
  if (y.numel() == 0) return dx;
  const c10::cuda::CUDAGuard guard(y.device());
  C10_CUDA_CHECK(softmax_backward(dtype_of(y), grad.const_data_ptr(), y.const_data_ptr(),
                                  dx.mutable_data_ptr(), shape.rows, shape.cols, launch_here()));
  return dx;
}

// --- rmsnorm ----------------------------------------------------------------------------

void run_rmsnorm(const at::Tensor& x, const at::Tensor& weight, double eps, Rows shape,
                 at::Tensor& out) {
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  C10_CUDA_CHECK(rmsnorm(dtype_of(x), x.const_data_ptr(), weight.const_data_ptr(), eps,
                         out.mutable_data_ptr(), shape.rows, shape.cols, launch_here()));
}

at::Tensor rmsnorm_functional(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const Rows shape = check_rmsnorm(x, weight, at::Tensor());
  at::Tensor out = empty_as(x);
  run_rmsnorm(x, weight, eps, shape, out);
  return out;
}

at::Tensor& rmsnorm_out(const at::Tensor& x, const at::Tensor& weight, double eps,
                        at::Tensor& out) {
  run_rmsnorm(x, weight, eps, check_rmsnorm(x, weight, out), out);
  return out;
}

/// The norm backwards' workspace: per-row statistics and column partials, in
/// the accumulation dtype. Allocated on the current stream by the caching
/// allocator and released when the op returns, before its kernels ran: safe,
/// because the allocator hands a freed block only to allocations on the same
/// stream, whose work is queued after these kernels.
struct Workspace {
  at::Tensor stats;
  at::Tensor partials;
  [[nodiscard]] NormGradWorkspace view() const {
    return {stats.mutable_data_ptr(), partials.mutable_data_ptr()};
  }
};

Workspace norm_workspace(const at::Tensor& x, bool layernorm, Rows shape, int sm_count) {
  const auto options = x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  return {at::empty({norm_stats_size(layernorm, shape.rows)}, options),
          at::empty({norm_partials_size(layernorm, shape.rows, shape.cols, sm_count)}, options)};
}

std::tuple<at::Tensor, at::Tensor> rmsnorm_backward_cuda(const at::Tensor& grad,
                                                         const at::Tensor& x,
                                                         const at::Tensor& weight, double eps) {
  const Rows shape = check_rmsnorm_backward(grad, x, weight);
  at::Tensor dx = empty_as(x);
  at::Tensor dweight = empty_as(weight);
  if (shape.rows == 0 || shape.cols == 0) {
    dweight.zero_();  // a sum over no rows
    return {dx, dweight};
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const Launch launch = launch_here();
  const Workspace workspace = norm_workspace(x, false, shape, launch.sm_count);
  C10_CUDA_CHECK(rmsnorm_backward(dtype_of(x), grad.const_data_ptr(), x.const_data_ptr(),
                                  weight.const_data_ptr(), eps, dx.mutable_data_ptr(),
                                  dweight.mutable_data_ptr(), shape.rows, shape.cols,
                                  workspace.view(), launch));
  return {dx, dweight};
}

// --- layernorm --------------------------------------------------------------------------

void run_layernorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                   double eps, Rows shape, at::Tensor& out) {
  if (x.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(x.device());
  C10_CUDA_CHECK(layernorm(dtype_of(x), x.const_data_ptr(), weight.const_data_ptr(),
                           bias.const_data_ptr(), eps, out.mutable_data_ptr(), shape.rows,
                           shape.cols, launch_here()));
}

at::Tensor layernorm_functional(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, double eps) {
  const Rows shape = check_layernorm(x, weight, bias, at::Tensor());
  at::Tensor out = empty_as(x);
  run_layernorm(x, weight, bias, eps, shape, out);
  return out;
}

at::Tensor& layernorm_out(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          double eps, at::Tensor& out) {
  run_layernorm(x, weight, bias, eps, check_layernorm(x, weight, bias, out), out);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layernorm_backward_cuda(const at::Tensor& grad,
                                                                       const at::Tensor& x,
                                                                       const at::Tensor& weight,
                                                                       double eps) {
  const Rows shape = check_layernorm_backward(grad, x, weight);
  at::Tensor dx = empty_as(x);
  at::Tensor dweight = empty_as(weight);
  at::Tensor dbias = empty_as(weight);
  if (shape.rows == 0 || shape.cols == 0) {
    dweight.zero_();
    dbias.zero_();
    return {dx, dweight, dbias};
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const Launch launch = launch_here();
  const Workspace workspace = norm_workspace(x, true, shape, launch.sm_count);
  C10_CUDA_CHECK(layernorm_backward(dtype_of(x), grad.const_data_ptr(), x.const_data_ptr(),
                                    weight.const_data_ptr(), eps, dx.mutable_data_ptr(),
                                    dweight.mutable_data_ptr(), dbias.mutable_data_ptr(),
                                    shape.rows, shape.cols, workspace.view(), launch));
  return {dx, dweight, dbias};
}

}  // namespace
}  // namespace runner_kernels::cuda

TORCH_LIBRARY_IMPL(runner, CUDA, m) {
  namespace k = runner_kernels::cuda;
  m.impl("scale", TORCH_FN(k::scale_functional));
  m.impl("scale.out", TORCH_FN(k::scale_out));
  m.impl("bias_gelu", TORCH_FN(k::bias_gelu_functional));
  m.impl("bias_gelu.out", TORCH_FN(k::bias_gelu_out));
  m.impl("bias_gelu_backward", TORCH_FN(k::bias_gelu_backward_cuda));
  m.impl("softmax", TORCH_FN(k::softmax_functional));
  m.impl("softmax.out", TORCH_FN(k::softmax_out));
  m.impl("softmax_backward", TORCH_FN(k::softmax_backward_cuda));
  m.impl("rmsnorm", TORCH_FN(k::rmsnorm_functional));
  m.impl("rmsnorm.out", TORCH_FN(k::rmsnorm_out));
  m.impl("rmsnorm_backward", TORCH_FN(k::rmsnorm_backward_cuda));
  m.impl("layernorm", TORCH_FN(k::layernorm_functional));
  m.impl("layernorm.out", TORCH_FN(k::layernorm_out));
  m.impl("layernorm_backward", TORCH_FN(k::layernorm_backward_cuda));
}
