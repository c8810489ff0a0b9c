// The launchers of the built-in kernels' CUDA implementations: raw device
// pointers, sizes and a stream, no LibTorch, so that nvcc never parses a
// LibTorch header. register_cuda.cpp (host compiler) does the torch side:
// the shared argument checks, the device guard, the current stream, outputs
// and workspaces; the .cu files hold the kernels and these launchers.
//
// Every pointer is a device pointer on the current device to contiguous data
// of the given dtype; inputs and outputs do not overlap. Sizes are element
// counts (64-bit: a tensor may hold more than 2^31 elements). Each launcher
// enqueues its kernels on `launch.stream`, launches nothing when there is no
// element, and returns cudaGetLastError() after its last launch (or
// cudaErrorInvalidValue for sizes no grid can cover).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace runner_kernels::cuda {

/// The op dtypes (ops.hpp); reductions accumulate in float, double for float64.
enum class DType { float32, float64, bfloat16, float16 };

/// Where to launch: the current stream of the tensors' device, and that
/// device's multiprocessor count (sizes the grids).
struct Launch {
  cudaStream_t stream = nullptr;
  int sm_count = 1;
};

/// Bytes of one accumulator: float (4) or, for float64, double (8).
[[nodiscard]] constexpr std::int64_t acc_bytes(DType dtype) {
  return dtype == DType::float64 ? 8 : 4;
}

// --- elementwise ---------------------------------------------------------------

/// y = x * s over n elements.
cudaError_t scale(DType dtype, const void* x, double s, void* y, std::int64_t n,
                  const Launch& launch);
/// y = gelu(x + bias[col]) over rows x cols (tanh: the tanh approximation).
cudaError_t bias_gelu(DType dtype, const void* x, const void* bias, void* y, std::int64_t rows,
                      std::int64_t cols, bool tanh, const Launch& launch);
/// dx = grad * gelu'(x + bias[col]).
cudaError_t bias_gelu_backward(DType dtype, const void* grad, const void* x, const void* bias,
                               void* dx, std::int64_t rows, std::int64_t cols, bool tanh,
                               const Launch& launch);

// --- softmax over the last dimension -------------------------------------------------

cudaError_t softmax(DType dtype, const void* x, void* y, std::int64_t rows, std::int64_t cols,
                    const Launch& launch);
/// dx = y * (grad - sum(grad * y)) per row.
cudaError_t softmax_backward(DType dtype, const void* grad, const void* y, void* dx,
                             std::int64_t rows, std::int64_t cols, const Launch& launch);

// --- normalizations -------------------------------------------------------------------

/// y = x * rsqrt(mean(x^2) + eps) * weight, per row.
cudaError_t rmsnorm(DType dtype, const void* x, const void* weight, double eps, void* y,
                    std::int64_t rows, std::int64_t cols, const Launch& launch);
/// y = (x - mean) * rsqrt(var + eps) * weight + bias, per row (biased variance).
cudaError_t layernorm(DType dtype, const void* x, const void* weight, const void* bias,
                      double eps, void* y, std::int64_t rows, std::int64_t cols,
                      const Launch& launch);

/// The weight (and bias) gradients of the norms are column sums over rows,
/// computed in two deterministic passes (no atomics): `chunks` row ranges
/// each write one partial sum per column, then one thread per column adds
/// the chunks' partials. This is the number of chunks: enough blocks to
/// fill the device (4 per multiprocessor, 32 columns per block) but at
/// least 64 rows per chunk and at most 1024 chunks. Always >= 1.
[[nodiscard]] constexpr std::int64_t weight_grad_chunks(std::int64_t rows, std::int64_t cols,
                                                        int sm_count) {
  const std::int64_t column_tiles = (std::max<std::int64_t>(cols, 1) + 31) / 32;
  const std::int64_t target_blocks = 4 * std::int64_t{std::max(sm_count, 1)};
  std::int64_t chunks = std::max<std::int64_t>(1, target_blocks / column_tiles);
  chunks = std::min(chunks, std::max<std::int64_t>(1, rows / 64));
  return std::min<std::int64_t>(chunks, 1024);
}

/// Workspace of a norm backward, in accumulators (acc_bytes each):
/// `stats` holds per-row statistics (rmsnorm: rstd; layernorm: mean, rstd),
/// `partials` the column partial sums (rmsnorm: chunks x cols for the weight;
/// layernorm: two such blocks, weight then bias).
struct NormGradWorkspace {
  void* stats = nullptr;
  void* partials = nullptr;
};
/// Accumulators each workspace buffer needs.
[[nodiscard]] constexpr std::int64_t norm_stats_size(bool layernorm, std::int64_t rows) {
  return (layernorm ? 2 : 1) * rows;
}
[[nodiscard]] constexpr std::int64_t norm_partials_size(bool layernorm, std::int64_t rows,
                                                        std::int64_t cols, int sm_count) {
  return (layernorm ? 2 : 1) * weight_grad_chunks(rows, cols, sm_count) * cols;
}

/// dx and dweight (rows >= 1 and cols >= 1; the caller zeroes dweight when
/// there is no row).
cudaError_t rmsnorm_backward(DType dtype, const void* grad, const void* x, const void* weight,
                             double eps, void* dx, void* dweight, std::int64_t rows,
                             std::int64_t cols, const NormGradWorkspace& workspace,
                             const Launch& launch);
/// dx, dweight and dbias (same conditions).
cudaError_t layernorm_backward(DType dtype, const void* grad, const void* x, const void* weight,
                               double eps, void* dx, void* dweight, void* dbias,
                               std::int64_t rows, std::int64_t cols,
                               const NormGradWorkspace& workspace, const Launch& launch);

}  // namespace runner_kernels::cuda
