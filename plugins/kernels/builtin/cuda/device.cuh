// Device-side building blocks of the CUDA kernels (nvcc only): accumulation
// types, conversions, 16-byte vectors, warp and block all-reductions, the
// row-to-threads mapping of the row kernels, and grid sizing.
#pragma once

#include "launch.hpp"
#include "reduce_ops.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace runner_kernels::cuda::detail {

// --- types and conversions ------------------------------------------------------------

/// float for float, __half and __nv_bfloat16; double for double.
template <typename T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};
template <typename T>
using acc_t = typename AccOf<T>::type;

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }

/// Round to nearest even, as ATen's conversions do.
template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v);
template <>
__device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <>
__device__ __forceinline__ double from_acc<double>(double v) { return v; }
template <>
__device__ __forceinline__ __half from_acc<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float exp_acc(float v) { return expf(v); }
__device__ __forceinline__ double exp_acc(double v) { return exp(v); }
__device__ __forceinline__ float rsqrt_acc(float v) { return rsqrtf(v); }
__device__ __forceinline__ double rsqrt_acc(double v) { return rsqrt(v); }

/// Calls f(T{}) with the element type of `dtype` (at::Half and at::BFloat16
/// have the layout of __half and __nv_bfloat16).
template <typename F>
cudaError_t dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::bfloat16: return f(__nv_bfloat16{});
    case DType::float16: return f(__half{});
  }
  return cudaErrorInvalidValue;
}

// --- 16-byte vectors ------------------------------------------------------------------

/// Elements of T in one 16-byte access: 4 float, 2 double, 8 half/bfloat16.
template <typename T>
inline constexpr int kVec = static_cast<int>(16 / sizeof(T));

/// V elements accessed as one load/store of V * sizeof(T) bytes: the pointer
/// it is read through must be aligned to that size (the launchers check it).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

/// Whether every pointer is 16-byte aligned.
template <typename... P>
bool aligned16(const P*... pointers) {
  return ((reinterpret_cast<std::uintptr_t>(pointers) % 16 == 0) && ...);
}

// --- grid sizing ----------------------------------------------------------------------

inline constexpr int kElementwiseThreads = 256;

/// Blocks of `threads` for `work` items in a grid-stride loop: one item per
/// thread up to 16 waves of blocks per multiprocessor, then the loop takes
/// over. Never 0 and never above the grid's x limit.
inline unsigned grid_for(std::int64_t work, int threads, int sm_count) {
  const std::int64_t needed = (work + threads - 1) / threads;
  const std::int64_t cap = 16 * std::int64_t{sm_count > 0 ? sm_count : 1};
  return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

// --- reductions -----------------------------------------------------------------------

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float shfl_xor(float v, int m) { return __shfl_xor_sync(kFullMask, v, m); }
__device__ __forceinline__ double shfl_xor(double v, int m) {
  return __shfl_xor_sync(kFullMask, v, m);
}
__device__ __forceinline__ float shfl_from(float v, int lane) { return __shfl_sync(kFullMask, v, lane); }
__device__ __forceinline__ double shfl_from(double v, int lane) {
  return __shfl_sync(kFullMask, v, lane);
}
template <typename Acc>
__device__ __forceinline__ Sum2<Acc> shfl_xor(const Sum2<Acc>& s, int m) {
  return {shfl_xor(s.a, m), shfl_xor(s.b, m)};
}
template <typename Acc>
__device__ __forceinline__ Sum2<Acc> shfl_from(const Sum2<Acc>& s, int lane) {
  return {shfl_from(s.a, lane), shfl_from(s.b, lane)};
}
template <typename Acc>
__device__ __forceinline__ MaxSum<Acc> shfl_xor(const MaxSum<Acc>& s, int m) {
  return {shfl_xor(s.max, m), shfl_xor(s.sum, m)};
}
template <typename Acc>
__device__ __forceinline__ MaxSum<Acc> shfl_from(const MaxSum<Acc>& s, int lane) {
  return {shfl_from(s.max, lane), shfl_from(s.sum, lane)};
}
template <typename Acc>
__device__ __forceinline__ Welford<Acc> shfl_xor(const Welford<Acc>& s, int m) {
  return {shfl_xor(s.n, m), shfl_xor(s.mean, m), shfl_xor(s.m2, m)};
}
template <typename Acc>
__device__ __forceinline__ Welford<Acc> shfl_from(const Welford<Acc>& s, int lane) {
  return {shfl_from(s.n, lane), shfl_from(s.mean, lane), shfl_from(s.m2, lane)};
}

/// Plain sum of a float or double.
struct Plus {
  template <typename Acc>
  __device__ __forceinline__ Acc operator()(Acc x, Acc y) const {
    return x + y;
  }
};
/// combine() of reduce_ops.hpp.
struct Combine {
  template <typename S>
  __device__ __forceinline__ S operator()(const S& x, const S& y) const {
    return combine(x, y);
  }
};

/// All 32 lanes of the calling warp (all active, converged) get the
/// reduction of their 32 states. The xor butterfly leaves every lane with the
/// reduction of all 32 but, for a non-commutative combine (Welford's), not
/// bit-identical across lanes; lane 0's result is broadcast so that every
/// thread of a row normalizes with the same statistics.
template <typename S, typename Op>
__device__ __forceinline__ S warp_allreduce(S s, Op op) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) s = op(s, shfl_xor(s, m));
  return shfl_from(s, 0);
}

/// All kThreads threads of the block (blockDim = (kThreads, 1, 1); every
/// thread calls it, so never under a thread-dependent branch) get the
/// reduction of their states. Shared-memory protocol, per call:
///   lane 0 of each warp writes slots[warp]        (W1)
///   __syncthreads                                  (B1)
///   warp 0 reads slots[0..kWarps) (R1), reduces, lane 0 writes slots[kWarps] (W2)
///   __syncthreads                                  (B2)
///   everyone reads slots[kWarps]                   (R2)
/// Back-to-back calls need no third barrier: the next call's W1 comes after
/// B2, hence after this call's R1; its W2 comes after its B1, which every
/// thread reaches only after its own R2 of this call.
template <int kThreads, typename S, typename Op>
__device__ __forceinline__ S block_allreduce(S s, Op op, S identity) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, one block");
  constexpr int kWarps = kThreads / 32;
  __shared__ S slots[kWarps + 1];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  s = warp_allreduce(s, op);
  if (lane == 0) slots[warp] = s;
  __syncthreads();
  if (warp == 0) {
    S t = lane < kWarps ? slots[lane] : identity;
    t = warp_allreduce(t, op);
    if (lane == 0) slots[kWarps] = t;
  }
  __syncthreads();
  return slots[kWarps];
}

// --- rows -> threads ---------------------------------------------------------------------

/// Threads of a row kernel on one row: kGroup == 32 is a warp per row,
/// blockDim = (32, kWarpRowsPerBlock), each warp (threadIdx.y) its own row,
/// reductions by shuffles only (no __syncthreads, so warps of a block may
/// leave the row loop at different times); kGroup > 32 is a block of kGroup
/// threads per row, blockDim = (kGroup, 1), whose row loop bound is the same
/// for every thread of the block (it depends on blockIdx only), which keeps
/// block_allreduce's barriers uniform. In both, threadIdx.x is the thread's
/// position in the row and the loop over columns strides by kGroup, so any
/// row length works without holding the row in registers.
inline constexpr int kWarpRowsPerBlock = 4;
inline constexpr int kRowBlockThreads = 256;
/// Rows up to this length go a warp per row.
inline constexpr std::int64_t kWarpRowMaxCols = 1024;

template <int kGroup>
struct RowGroup {
  static constexpr int kThreadsPerBlock = kGroup == 32 ? 32 * kWarpRowsPerBlock : kGroup;
  static constexpr int kRowsPerBlock = kGroup == 32 ? kWarpRowsPerBlock : 1;

  __device__ static std::int64_t first_row() {
    return std::int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.y;
  }
  __device__ static std::int64_t row_stride() { return std::int64_t{gridDim.x} * kRowsPerBlock; }

  template <typename S, typename Op>
  __device__ static S allreduce(S s, Op op, S identity) {
    if constexpr (kGroup == 32) {
      return warp_allreduce(s, op);
    } else {
      return block_allreduce<kGroup>(s, op, identity);
    }
  }

  static dim3 block() { return kGroup == 32 ? dim3(32, kWarpRowsPerBlock) : dim3(kGroup); }
  /// Blocks for `rows`: every row one group, at most 64 blocks per
  /// multiprocessor (then the row loop strides).
  static unsigned grid(std::int64_t rows, int sm_count) {
    const std::int64_t needed = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    const std::int64_t cap = 64 * std::int64_t{sm_count > 0 ? sm_count : 1};
    return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
  }
};

/// Launches `kernel_for<kGroup>` with the row group that fits `cols`.
template <typename Launcher>
cudaError_t launch_rows(std::int64_t cols, Launcher&& launcher) {
  if (cols <= kWarpRowMaxCols) return launcher(RowGroup<32>{});
  return launcher(RowGroup<kRowBlockThreads>{});
}

}  // namespace runner_kernels::cuda::detail
