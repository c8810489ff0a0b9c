// Softmax over the last dimension and its backward.
//
// Launch: a warp per row for rows of up to 1024 columns, else a block of 256
// threads per row (detail::RowGroup); rows beyond the grid are taken by a
// grid-stride loop. Thread t of a row's group handles columns t, t + G,
// t + 2G, ... (G the group size): consecutive threads read consecutive
// elements (coalesced), and a row of any length is covered by the loop, re-read
// from global memory (L2) on each pass instead of held in registers.
//
// Forward, two passes over the row: an online max/sum (reduce_ops.hpp MaxSum:
// each thread folds its columns, then the group combines the states), then
// y = exp(x - max) / sum. Numerically stable: every exponent is <= 0.
// Backward, two passes: dot = sum(grad * y), then dx = y * (grad - dot).
// Accumulation in float (double for float64).
//
// In place: an out variant may be given x itself (ops.cpp's check refuses
// only a partial overlap), so the forward kernels' pointers are not
// __restrict__, and every element is read, by the thread that then writes it,
// before it is written and never read again afterwards (a row kernel's
// reduction pass ends in a warp shuffle or __syncthreads before any write).
#include "device.cuh"

namespace runner_kernels::cuda {
namespace {

using detail::acc_t;
using detail::from_acc;
using detail::to_acc;

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreadsPerBlock)
    softmax_forward_kernel(const T* x, T* y, std::int64_t rows,
                           std::int64_t cols) {
  using Acc = acc_t<T>;
  constexpr int kGroup = G::kThreadsPerBlock / G::kRowsPerBlock;
  for (std::int64_t row = G::first_row(); row < rows; row += G::row_stride()) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    MaxSum<Acc> state = max_sum_identity<Acc>();
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroup) state = push(state, to_acc(xr[c]));
    state = G::allreduce(state, detail::Combine{}, max_sum_identity<Acc>());
    // A row of -inf only (sum 0) gives NaN, as ATen's softmax does.
    const Acc inv_sum = Acc(1) / state.sum;
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroup)
      yr[c] = from_acc<T>(detail::exp_acc(to_acc(xr[c]) - state.max) * inv_sum);
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreadsPerBlock)
    softmax_backward_kernel(const T* __restrict__ grad, const T* __restrict__ y,
                            T* __restrict__ dx, std::int64_t rows, std::int64_t cols) {
  using Acc = acc_t<T>;
  constexpr int kGroup = G::kThreadsPerBlock / G::kRowsPerBlock;
  for (std::int64_t row = G::first_row(); row < rows; row += G::row_stride()) {
    const std::int64_t base = row * cols;
    Acc dot = Acc(0);
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroup)
      dot += to_acc(grad[base + c]) * to_acc(y[base + c]);
    dot = G::allreduce(dot, detail::Plus{}, Acc(0));
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroup) {
      const Acc yv = to_acc(y[base + c]);
      dx[base + c] = from_acc<T>(yv * (to_acc(grad[base + c]) - dot));
    }
  }
}

}  // namespace

cudaError_t softmax(DType dtype, const void* x, void* y, std::int64_t rows, std::int64_t cols,
                    const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    return detail::launch_rows(cols, [&](auto group) {
      using G = decltype(group);
      softmax_forward_kernel<T, G><<<G::grid(rows, launch.sm_count), G::block(), 0, launch.stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), rows, cols);
      return cudaGetLastError();
    });
  });
}

cudaError_t softmax_backward(DType dtype, const void* grad, const void* y, void* dx,
                             std::int64_t rows, std::int64_t cols, const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    return detail::launch_rows(cols, [&](auto group) {
      using G = decltype(group);
      softmax_backward_kernel<T, G>
          <<<G::grid(rows, launch.sm_count), G::block(), 0, launch.stream>>>(
              static_cast<const T*>(grad), static_cast<const T*>(y), static_cast<T*>(dx), rows,
              cols);
      return cudaGetLastError();
    });
  });
}

}  // namespace runner_kernels::cuda
