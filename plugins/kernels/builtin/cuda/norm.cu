// rmsnorm and layernorm over the last dimension, forward and backward.
//
// Row kernels: the launch shape of softmax.cu (a warp per row up to 1024
// columns, else 256 threads per row; thread t of a row takes columns t,
// t + G, ...; a grid-stride loop over rows). Accumulation in float (double
// for float64).
//   rmsnorm forward:   sum(x^2) -> rstd = rsqrt(sum / cols + eps); y = x * rstd * w.
//   layernorm forward: Welford (mean, m2) per thread, Chan-merged across the
//                      group -> rstd = rsqrt(m2 / cols + eps);
//                      y = (x - mean) * rstd * w + b.
//   rmsnorm backward:  one pass for (sum(x^2), sum(g * w * x)); with
//                      xhat = x * rstd, gw = g * w:
//                      dx = rstd * (gw - xhat * mean(gw * xhat)),
//                      mean(gw * xhat) = rstd * sum(g * w * x) / cols.
//   layernorm backward: Welford pass for mean and rstd, then a pass for
//                      (sum(gw), sum(gw * xhat)) (kept apart from the
//                      statistics: sum(gw * x) - mean * sum(gw) would cancel),
//                      dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)).
// The backwards' row kernels also store each row's statistics (rstd; mean
// and rstd) for the weight and bias gradients, column sums over rows:
//   dw[c] = sum_r g[r, c] * xhat[r, c],  db[c] = sum_r g[r, c]
// in two deterministic passes: column_partials_kernel, blockDim (32, 8) and
// grid (ceil(cols / 32), chunks): thread (tx, ty) of block (bx, k) sums
// column bx * 32 + tx over rows chunk_begin + ty, + 8, ... < chunk_end; the
// 8 partials of a column are added through shared memory and written to
// partials[k * cols + c]. Then column_finalize_kernel adds the chunks'
// partials of a column (one thread per column, reads coalesced across
// columns) and rounds once to the output dtype.
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
using detail::rsqrt_acc;
using detail::to_acc;

template <typename G>
inline constexpr int kGroupOf = G::kThreadsPerBlock / G::kRowsPerBlock;

template <typename Acc>
__device__ __forceinline__ Welford<Acc> welford_identity() {
  return {Acc(0), Acc(0), Acc(0)};
}

/// The mean and rstd of row xr, identical in every thread of the group.
template <typename T, typename G>
__device__ __forceinline__ void layernorm_stats(const T* xr, std::int64_t cols,
                                                acc_t<T> eps, acc_t<T>& mean, acc_t<T>& rstd) {
  using Acc = acc_t<T>;
  Welford<Acc> w = welford_identity<Acc>();
  for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>) w = push(w, to_acc(xr[c]));
  w = G::allreduce(w, detail::Combine{}, welford_identity<Acc>());
  mean = w.mean;
  // m2 >= 0 in exact arithmetic; rounding can leave it a hair below.
  const Acc var = w.m2 > Acc(0) ? w.m2 / static_cast<Acc>(cols) : Acc(0);
  rstd = rsqrt_acc(var + eps);
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreadsPerBlock)
    rmsnorm_forward_kernel(const T* x, const T* weight, acc_t<T> eps, T* y, std::int64_t rows, std::int64_t cols) {
  using Acc = acc_t<T>;
  for (std::int64_t row = G::first_row(); row < rows; row += G::row_stride()) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Acc ss = Acc(0);
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>) {
      const Acc v = to_acc(xr[c]);
      ss += v * v;
    }
    ss = G::allreduce(ss, detail::Plus{}, Acc(0));
    const Acc rstd = rsqrt_acc(ss / static_cast<Acc>(cols) + eps);
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>)
      yr[c] = from_acc<T>(to_acc(xr[c]) * rstd * to_acc(weight[c]));
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreadsPerBlock)
    layernorm_forward_kernel(const T* x, const T* weight, const T* bias, acc_t<T> eps, T* y,
                             std::int64_t rows, std::int64_t cols) {
  using Acc = acc_t<T>;
  for (std::int64_t row = G::first_row(); row < rows; row += G::row_stride()) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    Acc mean;
    Acc rstd;
    layernorm_stats<T, G>(xr, cols, eps, mean, rstd);
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>)
      yr[c] = from_acc<T>((to_acc(xr[c]) - mean) * rstd * to_acc(weight[c]) + to_acc(bias[c]));
  }
}

/// dx, and stats[row] = rstd.
template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreadsPerBlock)
    rmsnorm_backward_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                            const T* __restrict__ weight, acc_t<T> eps, T* __restrict__ dx,
                            acc_t<T>* __restrict__ stats, std::int64_t rows, std::int64_t cols) {
  using Acc = acc_t<T>;
  for (std::int64_t row = G::first_row(); row < rows; row += G::row_stride()) {
    const std::int64_t base = row * cols;
    Sum2<Acc> sums{Acc(0), Acc(0)};  // a: sum(x^2), b: sum(g * w * x)
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>) {
      const Acc v = to_acc(x[base + c]);
      sums.a += v * v;
      sums.b += to_acc(grad[base + c]) * to_acc(weight[c]) * v;
    }
    sums = G::allreduce(sums, detail::Combine{}, Sum2<Acc>{Acc(0), Acc(0)});
    const Acc n = static_cast<Acc>(cols);
    const Acc rstd = rsqrt_acc(sums.a / n + eps);
    const Acc mean_gw_xhat = rstd * sums.b / n;
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>) {
      const Acc xhat = to_acc(x[base + c]) * rstd;
      const Acc gw = to_acc(grad[base + c]) * to_acc(weight[c]);
      dx[base + c] = from_acc<T>(rstd * (gw - xhat * mean_gw_xhat));
    }
    if (threadIdx.x == 0) stats[row] = rstd;
  }
}

/// dx, and stats[2 row] = mean, stats[2 row + 1] = rstd.
template <typename T, typename G>
__global__ void __launch_bounds__(G::kThreadsPerBlock)
    layernorm_backward_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                              const T* __restrict__ weight, acc_t<T> eps, T* __restrict__ dx,
                              acc_t<T>* __restrict__ stats, std::int64_t rows,
                              std::int64_t cols) {
  using Acc = acc_t<T>;
  for (std::int64_t row = G::first_row(); row < rows; row += G::row_stride()) {
    const std::int64_t base = row * cols;
    Acc mean;
    Acc rstd;
    layernorm_stats<T, G>(x + base, cols, eps, mean, rstd);
    Sum2<Acc> sums{Acc(0), Acc(0)};  // a: sum(gw), b: sum(gw * xhat)
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>) {
      const Acc gw = to_acc(grad[base + c]) * to_acc(weight[c]);
      sums.a += gw;
      sums.b += gw * (to_acc(x[base + c]) - mean) * rstd;
    }
    sums = G::allreduce(sums, detail::Combine{}, Sum2<Acc>{Acc(0), Acc(0)});
    const Acc n = static_cast<Acc>(cols);
    const Acc mean_gw = sums.a / n;
    const Acc mean_gw_xhat = sums.b / n;
    for (std::int64_t c = threadIdx.x; c < cols; c += kGroupOf<G>) {
      const Acc xhat = (to_acc(x[base + c]) - mean) * rstd;
      const Acc gw = to_acc(grad[base + c]) * to_acc(weight[c]);
      dx[base + c] = from_acc<T>(rstd * (gw - mean_gw - xhat * mean_gw_xhat));
    }
    if (threadIdx.x == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = rstd;
    }
  }
}

constexpr int kColumnTile = 32;  // columns per block: one warp's width, coalesced
constexpr int kColumnRowsPerPass = 8;

/// Partial column sums of g * xhat (and of g, kLayer) over one chunk of rows.
/// Every thread reaches the barrier: only the loads and the final store
/// depend on c < cols.
template <typename T, bool kLayer>
__global__ void __launch_bounds__(kColumnTile* kColumnRowsPerPass)
    column_partials_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                           const acc_t<T>* __restrict__ stats, std::int64_t rows,
                           std::int64_t cols, std::int64_t rows_per_chunk,
                           acc_t<T>* __restrict__ partials_w, acc_t<T>* __restrict__ partials_b) {
  using Acc = acc_t<T>;
  __shared__ Acc tile_w[kColumnRowsPerPass][kColumnTile];
  __shared__ Acc tile_b[kColumnRowsPerPass][kColumnTile];
  const std::int64_t c = std::int64_t{blockIdx.x} * kColumnTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t begin = chunk * rows_per_chunk;
  const std::int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  Acc sum_w = Acc(0);
  Acc sum_b = Acc(0);
  if (c < cols) {
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kColumnRowsPerPass) {
      const Acc g = to_acc(grad[r * cols + c]);
      const Acc v = to_acc(x[r * cols + c]);
      if constexpr (kLayer) {
        sum_w += g * ((v - stats[2 * r]) * stats[2 * r + 1]);
        sum_b += g;
      } else {
        sum_w += g * (v * stats[r]);
      }
    }
  }
  tile_w[threadIdx.y][threadIdx.x] = sum_w;
  tile_b[threadIdx.y][threadIdx.x] = sum_b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    Acc w = Acc(0);
    Acc b = Acc(0);
#pragma unroll
    for (int k = 0; k < kColumnRowsPerPass; ++k) {
      w += tile_w[k][threadIdx.x];
      b += tile_b[k][threadIdx.x];
    }
    partials_w[chunk * cols + c] = w;
    if constexpr (kLayer) partials_b[chunk * cols + c] = b;
  }
}

/// out[c] = sum over chunks of partials[k * cols + c], rounded once.
template <typename T>
__global__ void __launch_bounds__(detail::kElementwiseThreads)
    column_finalize_kernel(const acc_t<T>* __restrict__ partials, std::int64_t chunks,
                           std::int64_t cols, T* __restrict__ out) {
  using Acc = acc_t<T>;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t c = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < cols;
       c += stride) {
    Acc sum = Acc(0);
    for (std::int64_t k = 0; k < chunks; ++k) sum += partials[k * cols + c];
    out[c] = from_acc<T>(sum);
  }
}

/// The weight (and bias) gradients from the stats the row kernel stored.
template <typename T, bool kLayer>
cudaError_t launch_weight_grads(const T* grad, const T* x, const acc_t<T>* stats,
                                std::int64_t rows, std::int64_t cols, acc_t<T>* partials,
                                T* dweight, T* dbias, const Launch& launch) {
  const std::int64_t chunks = weight_grad_chunks(rows, cols, launch.sm_count);
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const std::int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  acc_t<T>* partials_b = kLayer ? partials + chunks * cols : nullptr;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  column_partials_kernel<T, kLayer>
      <<<grid, dim3(kColumnTile, kColumnRowsPerPass), 0, launch.stream>>>(
          grad, x, stats, rows, cols, rows_per_chunk, partials, partials_b);
  if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  const unsigned blocks = detail::grid_for(cols, detail::kElementwiseThreads, launch.sm_count);
  column_finalize_kernel<T>
      <<<blocks, detail::kElementwiseThreads, 0, launch.stream>>>(partials, chunks, cols, dweight);
  if constexpr (kLayer) {
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
    column_finalize_kernel<T><<<blocks, detail::kElementwiseThreads, 0, launch.stream>>>(
        partials_b, chunks, cols, dbias);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm(DType dtype, const void* x, const void* weight, double eps, void* y,
                    std::int64_t rows, std::int64_t cols, const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    return detail::launch_rows(cols, [&](auto group) {
      using G = decltype(group);
      rmsnorm_forward_kernel<T, G><<<G::grid(rows, launch.sm_count), G::block(), 0, launch.stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<acc_t<T>>(eps),
          static_cast<T*>(y), rows, cols);
      return cudaGetLastError();
    });
  });
}

cudaError_t layernorm(DType dtype, const void* x, const void* weight, const void* bias,
                      double eps, void* y, std::int64_t rows, std::int64_t cols,
                      const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    return detail::launch_rows(cols, [&](auto group) {
      using G = decltype(group);
      layernorm_forward_kernel<T, G>
          <<<G::grid(rows, launch.sm_count), G::block(), 0, launch.stream>>>(
              static_cast<const T*>(x), static_cast<const T*>(weight),
              static_cast<const T*>(bias), static_cast<acc_t<T>>(eps), static_cast<T*>(y), rows,
              cols);
      return cudaGetLastError();
    });
  });
}

cudaError_t rmsnorm_backward(DType dtype, const void* grad, const void* x, const void* weight,
                             double eps, void* dx, void* dweight, std::int64_t rows,
                             std::int64_t cols, const NormGradWorkspace& workspace,
                             const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = acc_t<T>;
    auto* stats = static_cast<Acc*>(workspace.stats);
    const cudaError_t error = detail::launch_rows(cols, [&](auto group) {
      using G = decltype(group);
      rmsnorm_backward_kernel<T, G>
          <<<G::grid(rows, launch.sm_count), G::block(), 0, launch.stream>>>(
              static_cast<const T*>(grad), static_cast<const T*>(x),
              static_cast<const T*>(weight), static_cast<Acc>(eps), static_cast<T*>(dx), stats,
              rows, cols);
      return cudaGetLastError();
    });
    if (error != cudaSuccess) return error;
    return launch_weight_grads<T, false>(static_cast<const T*>(grad), static_cast<const T*>(x),
                                         stats, rows, cols, static_cast<Acc*>(workspace.partials),
                                         static_cast<T*>(dweight), nullptr, launch);
  });
}

cudaError_t layernorm_backward(DType dtype, const void* grad, const void* x, const void* weight,
                               double eps, void* dx, void* dweight, void* dbias,
                               std::int64_t rows, std::int64_t cols,
                               const NormGradWorkspace& workspace, const Launch& launch) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return detail::dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = acc_t<T>;
    auto* stats = static_cast<Acc*>(workspace.stats);
    const cudaError_t error = detail::launch_rows(cols, [&](auto group) {
      using G = decltype(group);
      layernorm_backward_kernel<T, G>
          <<<G::grid(rows, launch.sm_count), G::block(), 0, launch.stream>>>(
              static_cast<const T*>(grad), static_cast<const T*>(x),
              static_cast<const T*>(weight), static_cast<Acc>(eps), static_cast<T*>(dx), stats,
              rows, cols);
      return cudaGetLastError();
    });
    if (error != cudaSuccess) return error;
    return launch_weight_grads<T, true>(static_cast<const T*>(grad), static_cast<const T*>(x),
                                        stats, rows, cols, static_cast<Acc*>(workspace.partials),
                                        static_cast<T*>(dweight), static_cast<T*>(dbias), launch);
  });
}

}  // namespace runner_kernels::cuda
