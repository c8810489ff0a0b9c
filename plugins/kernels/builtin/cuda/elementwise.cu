// scale, bias_gelu and bias_gelu_backward: elementwise kernels.
//
// Launch: 256 threads per block, a grid-stride loop over 16-byte vectors of
// V elements (V = 4 float, 2 double, 8 half/bfloat16) when every pointer is
// 16-byte aligned (and, for bias_gelu, cols % V == 0 so that a vector never
// crosses a row and the bias vector at its column is aligned too), else the
// same kernel with V = 1. Vector i covers elements [i*V, i*V + V); the
// n % V trailing elements (vector path only) go one each to the first
// threads of the grid. All indices are 64-bit. Arithmetic in float (double
// for float64), GELU through math.hpp, shared with the CPU implementation.
//
// In place: an out variant may be given x itself (ops.cpp's check refuses
// only a partial overlap), so the forward kernels' pointers are not
// __restrict__, and every element is read, by the thread that then writes it,
// before it is written and never read again afterwards (a row kernel's
// reduction pass ends in a warp shuffle or __syncthreads before any write).
#include "../math.hpp"
#include "device.cuh"

namespace runner_kernels::cuda {
namespace {

using detail::acc_t;
using detail::from_acc;
using detail::to_acc;
using detail::Vec;

template <typename Acc>
__device__ __forceinline__ Acc gelu(Acc v, bool tanh) {
  return tanh ? math::gelu_tanh(v) : math::gelu_erf(v);
}
template <typename Acc>
__device__ __forceinline__ Acc gelu_grad(Acc v, bool tanh) {
  return tanh ? math::gelu_tanh_grad(v) : math::gelu_erf_grad(v);
}

template <typename T, int V>
__global__ void __launch_bounds__(detail::kElementwiseThreads)
    scale_kernel(const T* x, acc_t<T> s, T* y, std::int64_t n) {
  const std::int64_t vectors = n / V;
  const std::int64_t first = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const auto* xv = reinterpret_cast<const Vec<T, V>*>(x);
  auto* yv = reinterpret_cast<Vec<T, V>*>(y);
  for (std::int64_t i = first; i < vectors; i += stride) {
    Vec<T, V> a = xv[i];
#pragma unroll
    for (int k = 0; k < V; ++k) a.v[k] = from_acc<T>(to_acc(a.v[k]) * s);
    yv[i] = a;
  }
  if constexpr (V > 1) {
    const std::int64_t t = vectors * V + first;  // n - vectors * V < V <= threads in the grid
    if (t < n) y[t] = from_acc<T>(to_acc(x[t]) * s);
  }
}

/// Forward (kBackward false): out = gelu(x + bias). Backward: out = grad *
/// gelu'(x + bias). Column bookkeeping without a division per element: a
/// thread's column c = (i * V) % cols advances by step = (stride * V) % cols
/// per iteration, and c + step < 2 * cols, so one conditional subtraction
/// keeps it in [0, cols). With cols % V == 0 (vector path), c is a multiple
/// of V, so the V elements of a vector share a row and bias[c .. c + V).
template <typename T, int V, bool kBackward>
__global__ void __launch_bounds__(detail::kElementwiseThreads)
    bias_gelu_kernel(const T* grad, const T* x, const T* bias, T* out, std::int64_t rows,
                     std::int64_t cols, bool tanh) {
  using Acc = acc_t<T>;
  const std::int64_t vectors = rows * cols / V;  // exact: V == 1 or cols % V == 0
  const std::int64_t first = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t step = (stride * V) % cols;
  std::int64_t c = (first * V) % cols;
  const auto* xv = reinterpret_cast<const Vec<T, V>*>(x);
  const auto* gv = reinterpret_cast<const Vec<T, V>*>(grad);
  auto* ov = reinterpret_cast<Vec<T, V>*>(out);
  for (std::int64_t i = first; i < vectors; i += stride) {
    const Vec<T, V> a = xv[i];
    const Vec<T, V> b = *reinterpret_cast<const Vec<T, V>*>(bias + c);
    Vec<T, V> o;
    if constexpr (kBackward) {
      const Vec<T, V> g = gv[i];
#pragma unroll
      for (int k = 0; k < V; ++k)
        o.v[k] = from_acc<T>(to_acc(g.v[k]) * gelu_grad(to_acc(a.v[k]) + to_acc(b.v[k]), tanh));
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = from_acc<T>(gelu(to_acc(a.v[k]) + to_acc(b.v[k]), tanh));
    }
    ov[i] = o;
    c += step;
    if (c >= cols) c -= cols;
  }
}

template <typename T, int V>
cudaError_t launch_scale(const void* x, double s, void* y, std::int64_t n, const Launch& launch) {
  const unsigned blocks = detail::grid_for(n / V, detail::kElementwiseThreads, launch.sm_count);
  scale_kernel<T, V><<<blocks, detail::kElementwiseThreads, 0, launch.stream>>>(
      static_cast<const T*>(x), static_cast<acc_t<T>>(s), static_cast<T*>(y), n);
  return cudaGetLastError();
}

template <typename T, int V, bool kBackward>
cudaError_t launch_bias_gelu(const void* grad, const void* x, const void* bias, void* out,
                             std::int64_t rows, std::int64_t cols, bool tanh,
                             const Launch& launch) {
  const unsigned blocks =
      detail::grid_for(rows * cols / V, detail::kElementwiseThreads, launch.sm_count);
  bias_gelu_kernel<T, V, kBackward><<<blocks, detail::kElementwiseThreads, 0, launch.stream>>>(
      static_cast<const T*>(grad), static_cast<const T*>(x), static_cast<const T*>(bias),
      static_cast<T*>(out), rows, cols, tanh);
  return cudaGetLastError();
}

template <bool kBackward>
cudaError_t bias_gelu_any(DType dtype, const void* grad, const void* x, const void* bias,
                          void* out, std::int64_t rows, std::int64_t cols, bool tanh,
                          const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = detail::kVec<T>;
    // grad is null in the forward; aligned16 only asks about the pointers it reads.
    const bool vector = cols % V == 0 && detail::aligned16(x, bias, out) &&
                        (!kBackward || detail::aligned16(grad));
    return vector ? launch_bias_gelu<T, V, kBackward>(grad, x, bias, out, rows, cols, tanh, launch)
                  : launch_bias_gelu<T, 1, kBackward>(grad, x, bias, out, rows, cols, tanh, launch);
  });
}

}  // namespace

cudaError_t scale(DType dtype, const void* x, double s, void* y, std::int64_t n,
                  const Launch& launch) {
  if (n <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = detail::kVec<T>;
    return detail::aligned16(x, y) ? launch_scale<T, V>(x, s, y, n, launch)
                                   : launch_scale<T, 1>(x, s, y, n, launch);
  });
}

cudaError_t bias_gelu(DType dtype, const void* x, const void* bias, void* y, std::int64_t rows,
                      std::int64_t cols, bool tanh, const Launch& launch) {
  return bias_gelu_any<false>(dtype, nullptr, x, bias, y, rows, cols, tanh, launch);
}

cudaError_t bias_gelu_backward(DType dtype, const void* grad, const void* x, const void* bias,
                               void* dx, std::int64_t rows, std::int64_t cols, bool tanh,
                               const Launch& launch) {
  return bias_gelu_any<true>(dtype, grad, x, bias, dx, rows, cols, tanh, launch);
}

}  // namespace runner_kernels::cuda
