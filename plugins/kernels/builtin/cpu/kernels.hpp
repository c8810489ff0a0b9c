// The CPU kernels behind the runner::* ops, as plain functions of raw
// pointers and sizes: the per-ISA translation unit (kernels_vec.cpp) sees no
// tensor, only ATen's vector headers and at::parallel_for.
//
// Every pointer is to contiguous data of the given dtype; `rows` x `cols`
// is the tensor seen as rows of its last dimension (ops.hpp's Rows). The
// reduced dtypes (bfloat16, float16) are loaded into float and accumulated in
// float; float64 computes in float64.
#pragma once

#include <cstdint>

namespace runner_kernels::cpu {

/// The dtypes the kernels compute in.
enum class Dtype { float32, float64, bfloat16, float16 };

/// One instruction set's kernels.
struct Kernels {
  /// "default", "avx2" or "avx512".
  const char* capability;
  /// y = x * s over n elements.
  void (*scale)(Dtype dtype, const void* x, void* y, std::int64_t n, double s);
  /// y = gelu(x + bias), bias of `cols` elements.
  void (*bias_gelu)(Dtype dtype, const void* x, const void* bias, void* y, std::int64_t rows,
                    std::int64_t cols, bool tanh);
  /// dx = grad * gelu'(x + bias).
  void (*bias_gelu_backward)(Dtype dtype, const void* grad, const void* x, const void* bias,
                             void* dx, std::int64_t rows, std::int64_t cols, bool tanh);
  /// y = softmax of each row.
  void (*softmax)(Dtype dtype, const void* x, void* y, std::int64_t rows, std::int64_t cols);
  /// dx = y * (grad - sum(grad * y)) per row.
  void (*softmax_backward)(Dtype dtype, const void* grad, const void* y, void* dx,
                           std::int64_t rows, std::int64_t cols);
  /// y = x / sqrt(mean(x^2) + eps) * weight per row.
  void (*rmsnorm)(Dtype dtype, const void* x, const void* weight, void* y, std::int64_t rows,
                  std::int64_t cols, double eps);
  /// dx, and dweight (`cols` elements, summed over rows).
  void (*rmsnorm_backward)(Dtype dtype, const void* grad, const void* x, const void* weight,
                           void* dx, void* dweight, std::int64_t rows, std::int64_t cols,
                           double eps);
  /// y = (x - mean) / sqrt(var + eps) * weight + bias per row (biased variance).
  void (*layernorm)(Dtype dtype, const void* x, const void* weight, const void* bias, void* y,
                    std::int64_t rows, std::int64_t cols, double eps);
  /// dx, dweight and dbias (`cols` elements each, summed over rows).
  void (*layernorm_backward)(Dtype dtype, const void* grad, const void* x, const void* weight,
                             void* dx, void* dweight, void* dbias, std::int64_t rows,
                             std::int64_t cols, double eps);
};

// One table per instruction set; kernels_vec.cpp defines the one of the
// CPU_CAPABILITY it is compiled for.
namespace DEFAULT {
const Kernels& kernels();
}
#if defined(RUNNER_KERNELS_X86_64)
namespace AVX2 {
const Kernels& kernels();
}
namespace AVX512 {
const Kernels& kernels();
}
#endif

/// The kernels of the instruction set ATen runs its own CPU kernels with
/// (at::get_cpu_capability(): the best the CPU has, or ATEN_CPU_CAPABILITY),
/// chosen once.
const Kernels& selected();

}  // namespace runner_kernels::cpu
