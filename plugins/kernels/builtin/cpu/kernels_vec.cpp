// The CPU kernels, vectorized with at::vec::Vectorized and parallel with
// at::parallel_for. Compiled once per instruction set (CMakeLists.txt):
// CPU_CAPABILITY names this copy's namespace and, through ATen's vector
// headers, its vector width. Only ATen's vector headers and Parallel.h here.
//
// Every kernel works on vectors of T (Vectorized<T>::size() elements), held
// as K vectors of the accumulation type (float, or double for double): one
// for float and double, two for bfloat16 and float16. A row's last, partial
// vector is loaded and stored with a count, its unused lanes masked out of
// reductions; no scalar tail loop.
//
// This file: scale, bias_gelu and softmax (forward and backward) and the
// table of this instruction set; the row norms are in norms_vec.cpp, what
// both use in vec_common.hpp.
#include "vec_common.hpp"

namespace runner_kernels::cpu {
namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using std::int64_t;

// ---------------------------------------------------------------- scale

template <typename T>
void scale_kernel(const T* x, T* y, int64_t n, double s) {
  using L = Lanes<T>;
  const typename L::V factor(static_cast<typename L::Acc>(s));
  const bool streaming = streamed<T>(n);
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + L::kWidth <= end; i += L::kWidth)
      L::store(y + i, L::load(x + i, L::kWidth) * factor, L::kWidth, streaming);
    if (i < end) L::store(y + i, L::load(x + i, end - i) * factor, end - i);
    end_streaming(streaming);
  });
}

// ---------------------------------------------------------------- bias_gelu

// The form of GELU is a template argument: no branch in the inner loop.
template <typename T, bool kTanh>
void bias_gelu_kernel(const T* x, const T* bias, T* y, int64_t rows, int64_t cols) {
  using L = Lanes<T>;
  using V = typename L::V;
  const bool streaming = streamed<T>(rows * cols);
  at::parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        const auto v = L::load(xr + j, n) + L::load(bias + j, n);
        L::store(yr + j, apply(v, [](const V& a) { return gelu<kTanh>(a); }), n, streaming);
      });
    }
    end_streaming(streaming);
  });
}

template <typename T, bool kTanh>
void bias_gelu_backward_kernel(const T* grad, const T* x, const T* bias, T* dx, int64_t rows,
                               int64_t cols) {
  using L = Lanes<T>;
  using V = typename L::V;
  at::parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r * cols;
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        const auto v = L::load(x + o + j, n) + L::load(bias + j, n);
        const auto d = apply(v, [](const V& a) { return gelu_grad<kTanh>(a); });
        L::store(dx + o + j, L::load(grad + o + j, n) * d, n);
      });
    }
  });
}

// ---------------------------------------------------------------- softmax

// Three passes over a row, the last two in cache: the row's maximum;
// e = exp(x - max) and its sum; e * (1 / sum). For float and double, e goes
// to the output row and is scaled there (two rows in L1, as ATen's kernel
// does); for bfloat16 and float16 to a float row buffer (one per task), so
// that e is rounded once, at the end.
template <typename T>
void softmax_kernel(const T* x, T* y, int64_t rows, int64_t cols) {
  using L = Lanes<T>;
  using Acc = typename L::Acc;
  using V = typename L::V;
  // Only the bfloat16 and float16 rows are written once (from the buffer).
  const bool streaming = L::kReduced && streamed<T>(rows * cols);
  at::parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    std::unique_ptr<Acc[]> buffer;
    if constexpr (L::kReduced) buffer = std::make_unique<Acc[]>(static_cast<std::size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      Acc* e_row = nullptr;
      if constexpr (L::kReduced) {
        e_row = buffer.get();
      } else {
        e_row = yr;
      }
      auto top = L::splat(-std::numeric_limits<Acc>::infinity());
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        const auto v = L::masked(L::load(xr + j, n), n, -std::numeric_limits<Acc>::infinity());
        for (int k = 0; k < L::K; ++k) top.v[k] = at::vec::maximum(top.v[k], v.v[k]);
      });
      const V row_max(L::max(top));
      Accumulator<T> total;
      const bool next = r + 1 < r1;
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        if (next) prefetch(xr + cols + j);
        const auto e = apply(L::load(xr + j, n) - row_max, [](const V& a) { return a.exp(); });
        L::store_acc(e_row + j, e, n);
        total.add(L::masked(e, n, 0));
      });
      const V inverse(Acc(1) / total.sum());
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        L::store(yr + j, L::load_acc(e_row + j, n) * inverse, n, streaming);
      });
    }
    end_streaming(streaming);
  });
}

template <typename T>
void softmax_backward_kernel(const T* grad, const T* y, T* dx, int64_t rows, int64_t cols) {
  using L = Lanes<T>;
  using V = typename L::V;
  at::parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r * cols;
      Accumulator<T> dot;
      // Lanes past a row's end load as zero: their products add nothing.
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        dot.add(L::load(grad + o + j, n) * L::load(y + o + j, n));
      });
      const V total(dot.sum());
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        L::store(dx + o + j, L::load(y + o + j, n) * (L::load(grad + o + j, n) - total), n);
      });
    }
  });
}

void scale(Dtype dtype, const void* x, void* y, int64_t n, double s) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel(in<T>(x), out<T>(y), n, s);
  });
}

void bias_gelu(Dtype dtype, const void* x, const void* bias, void* y, int64_t rows, int64_t cols,
               bool tanh) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (tanh)
      bias_gelu_kernel<T, true>(in<T>(x), in<T>(bias), out<T>(y), rows, cols);
    else
      bias_gelu_kernel<T, false>(in<T>(x), in<T>(bias), out<T>(y), rows, cols);
  });
}

void bias_gelu_backward(Dtype dtype, const void* grad, const void* x, const void* bias, void* dx,
                        int64_t rows, int64_t cols, bool tanh) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (tanh)
      bias_gelu_backward_kernel<T, true>(in<T>(grad), in<T>(x), in<T>(bias), out<T>(dx), rows, cols);
    else
      bias_gelu_backward_kernel<T, false>(in<T>(grad), in<T>(x), in<T>(bias), out<T>(dx), rows,
                                          cols);
  });
}

void softmax(Dtype dtype, const void* x, void* y, int64_t rows, int64_t cols) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel(in<T>(x), out<T>(y), rows, cols);
  });
}

void softmax_backward(Dtype dtype, const void* grad, const void* y, void* dx, int64_t rows,
                      int64_t cols) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel(in<T>(grad), in<T>(y), out<T>(dx), rows, cols);
  });
}

#define RUNNER_KERNELS_STRINGIFY2(x) #x
#define RUNNER_KERNELS_STRINGIFY(x) RUNNER_KERNELS_STRINGIFY2(x)

// "DEFAULT" -> "default", ...
constexpr const char* capability_name() {
  constexpr std::string_view name = RUNNER_KERNELS_STRINGIFY(CPU_CAPABILITY);
  if (name == "AVX512") return "avx512";
  if (name == "AVX2") return "avx2";
  return "default";
}

}  // namespace

// Constant-initialized: no code of this instruction set runs before the
// table is chosen.
const Kernels& kernels() {
  static constexpr Kernels table{capability_name(), scale,   bias_gelu,        bias_gelu_backward,
                             softmax,           softmax_backward, rmsnorm, rmsnorm_backward,
                             layernorm,         layernorm_backward};
  return table;
}

}  // namespace CPU_CAPABILITY
}  // namespace runner_kernels::cpu
