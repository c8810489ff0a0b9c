// The custom ops of the built-in kernels plugin, in namespace "runner":
//
//   scale(Tensor x, float s) -> Tensor                          y = x * s
//   scale.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)
//   bias_gelu(Tensor x, Tensor bias, str approximate="none") -> Tensor
//                                            y = gelu(x + bias), bias over the last dim
//   bias_gelu.out(Tensor x, Tensor bias, str approximate="none", *, Tensor(a!) out) -> Tensor(a!)
//   bias_gelu_backward(Tensor grad, Tensor x, Tensor bias, str approximate="none") -> Tensor
//                                            d/dx (grad w.r.t. bias is its sum over rows)
//   softmax(Tensor x) -> Tensor                                 row-wise over the last dim
//   softmax.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)
//   softmax_backward(Tensor grad, Tensor y) -> Tensor           y = softmax(x)
//   rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor
//                                            y = x / sqrt(mean(x^2) + eps) * weight
//   rmsnorm.out(Tensor x, Tensor weight, float eps, *, Tensor(a!) out) -> Tensor(a!)
//   rmsnorm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)
//   layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor
//   layernorm.out(Tensor x, Tensor weight, Tensor bias, float eps, *, Tensor(a!) out) -> Tensor(a!)
//   layernorm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor, Tensor)
//
// Dtypes: float32, float64, bfloat16, float16 on every device; reductions
// accumulate in float32 (float64 for float64). The functional forms have an
// Autograd implementation (through the *_backward ops); the out variants
// have none. The argument checks below are shared by the CPU and CUDA
// implementations, which call them first: every device refuses the same
// inputs with the same message.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>

namespace runner_kernels {

/// The op namespace.
inline constexpr const char* kNamespace = "runner";

/// A tensor seen as rows of its last dimension.
struct Rows {
  std::int64_t rows = 0;  ///< product of every dimension but the last (1 for a 1-D tensor)
  std::int64_t cols = 0;  ///< the last dimension
};

/// Whether bias_gelu's `approximate` is "tanh" (true) or "none" (false);
/// anything else throws.
[[nodiscard]] bool tanh_approximation(std::string_view approximate);

// Argument checks (TORCH_CHECK, so c10::Error): dtype one of the four, every
// tensor on x's device with x's dtype, contiguous, the shapes the op takes,
// and `out` (when defined) of x's shape, dtype and device and contiguous.
// Each message starts with the op's name: "runner::softmax: ...".
void check_scale(const at::Tensor& x, const at::Tensor& out);
[[nodiscard]] Rows check_bias_gelu(const at::Tensor& x, const at::Tensor& bias,
                                   const at::Tensor& out);
[[nodiscard]] Rows check_softmax(const at::Tensor& x, const at::Tensor& out);
[[nodiscard]] Rows check_rmsnorm(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& out);
[[nodiscard]] Rows check_layernorm(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias, const at::Tensor& out);
/// The backward ops: `grad` as the forward's output, plus the forward's checks.
[[nodiscard]] Rows check_bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                                            const at::Tensor& bias);
[[nodiscard]] Rows check_softmax_backward(const at::Tensor& grad, const at::Tensor& y);
[[nodiscard]] Rows check_rmsnorm_backward(const at::Tensor& grad, const at::Tensor& x,
                                          const at::Tensor& weight);
[[nodiscard]] Rows check_layernorm_backward(const at::Tensor& grad, const at::Tensor& x,
                                            const at::Tensor& weight);

}  // namespace runner_kernels
