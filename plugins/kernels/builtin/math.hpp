// Scalar formulas of the built-in kernels, shared by every implementation:
// the CPU kernels' scalar tails and tests, and the CUDA kernels (compiled by
// nvcc as __host__ __device__). No LibTorch here, so nvcc stays fast.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define RUNNER_KERNELS_HD __host__ __device__ __forceinline__
#else
#define RUNNER_KERNELS_HD inline
#endif

namespace runner_kernels::math {

/// 1/sqrt(2), sqrt(2/pi) and the cubic coefficient of GELU's tanh approximation.
inline constexpr double kInvSqrt2 = 0.70710678118654752440;
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;
inline constexpr double kGeluCubic = 0.044715;

/// Exact GELU: x * Phi(x) = x/2 * (1 + erf(x / sqrt(2))).
template <typename T>
RUNNER_KERNELS_HD T gelu_erf(T x) {
  using std::erf;
  return T(0.5) * x * (T(1) + erf(x * T(kInvSqrt2)));
}

/// d/dx of the exact GELU: Phi(x) + x * phi(x).
template <typename T>
RUNNER_KERNELS_HD T gelu_erf_grad(T x) {
  using std::erf;
  using std::exp;
  const T cdf = T(0.5) * (T(1) + erf(x * T(kInvSqrt2)));
  const T pdf = T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
  return cdf + x * pdf;
}

/// GELU's tanh approximation: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
template <typename T>
RUNNER_KERNELS_HD T gelu_tanh(T x) {
  using std::tanh;
  const T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return T(0.5) * x * (T(1) + tanh(inner));
}

/// d/dx of the tanh approximation.
template <typename T>
RUNNER_KERNELS_HD T gelu_tanh_grad(T x) {
  using std::tanh;
  const T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  const T t = tanh(inner);
  const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * d_inner;
}

}  // namespace runner_kernels::math
