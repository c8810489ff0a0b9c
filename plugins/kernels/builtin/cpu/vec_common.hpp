// What the per-instruction-set kernel files (kernels_vec.cpp, norms_vec.cpp)
// share: ATen's vector types held as packs of the accumulation type, loads
// and stores of a row's partial last vector, streaming stores, GELU, and the
// dtype dispatch. Included only by those files, each compiled once per
// CPU_CAPABILITY; everything is in an anonymous namespace inside that
// capability's namespace, so each object has its own copy (internal header).
#pragma once

#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../math.hpp"
#include "kernels.hpp"

#if !defined(CPU_CAPABILITY)
#error "the CPU kernel files (kernels_vec.cpp, norms_vec.cpp) are compiled with CPU_CAPABILITY=DEFAULT, AVX2 or AVX512"
#endif

namespace runner_kernels::cpu {
namespace CPU_CAPABILITY {

// The norms' entry points, defined in norms_vec.cpp for kernels_vec.cpp's table.
void rmsnorm(Dtype dtype, const void* x, const void* weight, void* y, std::int64_t rows,
             std::int64_t cols, double eps);
void rmsnorm_backward(Dtype dtype, const void* grad, const void* x, const void* weight, void* dx,
                      void* dweight, std::int64_t rows, std::int64_t cols, double eps);
void layernorm(Dtype dtype, const void* x, const void* weight, const void* bias, void* y,
               std::int64_t rows, std::int64_t cols, double eps);
void layernorm_backward(Dtype dtype, const void* grad, const void* x, const void* weight,
                        void* dx, void* dweight, void* dbias, std::int64_t rows,
                        std::int64_t cols, double eps);

namespace {


using at::vec::Vectorized;
using std::int64_t;

// Elements per parallel task, ATen's at::internal::GRAIN_SIZE: below it a
// call stays on the calling thread.
constexpr int64_t kGrain = 32768;

// Outputs of at least this many bytes are written with streaming
// (non-temporal) stores: they would not stay in the 32 MiB L3 anyway, and a
// plain store first reads the line it writes (read for ownership), a third
// stream of memory traffic besides the input and the output.
constexpr int64_t kStreamBytes = 16 << 20;

// Whether an output of `elements` T is streamed.
template <typename T>
bool streamed(int64_t elements) {
  return elements * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
}

// Orders a task's streaming stores before whatever follows the task.
inline void end_streaming([[maybe_unused]] bool streaming) {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  if (streaming) _mm_sfence();
#endif
}

// Asks for the cache line at `p`, for a row the next pass will read from
// memory: the row ops compute on one row in cache while the next arrives.
inline void prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

// Rows per parallel task for rows of `cols` elements: about kGrain elements.
int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1));
}

template <typename T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};

// K vectors of the accumulation type: one vector of T's elements.
template <typename V, int K>
struct Pack {
  V v[K];

  friend Pack operator+(Pack a, const Pack& b) {
    for (int k = 0; k < K; ++k) a.v[k] = a.v[k] + b.v[k];
    return a;
  }
  friend Pack operator-(Pack a, const Pack& b) {
    for (int k = 0; k < K; ++k) a.v[k] = a.v[k] - b.v[k];
    return a;
  }
  friend Pack operator*(Pack a, const Pack& b) {
    for (int k = 0; k < K; ++k) a.v[k] = a.v[k] * b.v[k];
    return a;
  }
  friend Pack operator-(Pack a, const V& s) {
    for (int k = 0; k < K; ++k) a.v[k] = a.v[k] - s;
    return a;
  }
  friend Pack operator*(Pack a, const V& s) {
    for (int k = 0; k < K; ++k) a.v[k] = a.v[k] * s;
    return a;
  }
};

// Applies `f` (a function of one vector) to each vector of a pack.
template <typename V, int K, typename F>
Pack<V, K> apply(Pack<V, K> a, const F& f) {
  for (int k = 0; k < K; ++k) a.v[k] = f(a.v[k]);
  return a;
}

// How T's elements are loaded into, and stored from, packs.
template <typename T>
struct Lanes {
  using Acc = typename AccOf<T>::type;
  using V = Vectorized<Acc>;
  static constexpr bool kReduced = !std::is_same_v<T, Acc>;
  static constexpr int K = kReduced ? 2 : 1;
  static constexpr int64_t kLanes = V::size();
  /// Elements of T per pack.
  static constexpr int64_t kWidth = kLanes * K;
  using P = Pack<V, K>;
  static_assert(kWidth == Vectorized<T>::size());

  static P splat(Acc a) {
    P p;
    for (int k = 0; k < K; ++k) p.v[k] = V(a);
    return p;
  }
  /// `n` (1..kWidth) elements; lanes past them are zero.
  static P load(const T* src, int64_t n) {
    P p;
    if constexpr (kReduced) {
      const auto t = n == kWidth ? Vectorized<T>::loadu(src) : Vectorized<T>::loadu(src, n);
      std::tie(p.v[0], p.v[1]) = at::vec::convert_to_float<T>(t);
    } else {
      p.v[0] = n == kWidth ? V::loadu(src) : V::loadu(src, n);
    }
    return p;
  }
  static void store(T* dst, const P& p, int64_t n) {
    if constexpr (kReduced) {
      const auto t = at::vec::convert_from_float<T>(p.v[0], p.v[1]);
      if (n == kWidth)
        t.store(dst);
      else
        t.store(dst, static_cast<int>(n));
    } else {
      if (n == kWidth)
        p.v[0].store(dst);
      else
        p.v[0].store(dst, n);
    }
  }
  /// store(), or a streaming store for a whole pack at a vector-aligned
  /// address when `streaming` (the DEFAULT build has none: plain stores).
  static void store(T* dst, const P& p, int64_t n, bool streaming) {
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
    constexpr std::uintptr_t kBytes = sizeof(Vectorized<T>);
    if (streaming && n == kWidth && reinterpret_cast<std::uintptr_t>(dst) % kBytes == 0) {
#if defined(CPU_CAPABILITY_AVX512)
      if constexpr (kReduced)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(dst),
                            at::vec::convert_from_float<T>(p.v[0], p.v[1]));
      else if constexpr (std::is_same_v<T, float>)
        _mm512_stream_ps(dst, p.v[0]);
      else
        _mm512_stream_pd(dst, p.v[0]);
#else
      if constexpr (kReduced)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst),
                            at::vec::convert_from_float<T>(p.v[0], p.v[1]));
      else if constexpr (std::is_same_v<T, float>)
        _mm256_stream_ps(dst, p.v[0]);
      else
        _mm256_stream_pd(dst, p.v[0]);
#endif
      return;
    }
#endif
    (void)streaming;
    store(dst, p, n);
  }
  /// A pack from / to a row buffer of the accumulation type.
  static P load_acc(const Acc* src, int64_t n) {
    P p;
    for (int k = 0; k < K; ++k) {
      const int64_t m = std::clamp<int64_t>(n - k * kLanes, 0, kLanes);
      p.v[k] = m == kLanes ? V::loadu(src + k * kLanes) : m > 0 ? V::loadu(src + k * kLanes, m) : V(0);
    }
    return p;
  }
  static void store_acc(Acc* dst, const P& p, int64_t n) {
    for (int k = 0; k < K; ++k) {
      const int64_t m = std::clamp<int64_t>(n - k * kLanes, 0, kLanes);
      if (m == kLanes)
        p.v[k].store(dst + k * kLanes);
      else if (m > 0)
        p.v[k].store(dst + k * kLanes, m);
    }
  }
  /// `p` with the lanes from `n` on set to `fill`, so that they drop out of a reduction.
  static P masked(const P& p, int64_t n, Acc fill) {
    if (n == kWidth) return p;
    P out;
    for (int k = 0; k < K; ++k) {
      const int64_t m = std::clamp<int64_t>(n - k * kLanes, 0, kLanes);
      out.v[k] = V::set(V(fill), p.v[k], m);
    }
    return out;
  }
  // Horizontal reductions through memory: per row, so their cost does not
  // matter (and ATen's vec_reduce_all trips GCC 12's -Wuninitialized inside
  // its own AVX-512 intrinsics header).
  static Acc sum(const P& p) {
    V s = p.v[0];
    for (int k = 1; k < K; ++k) s = s + p.v[k];
    __at_align__ Acc lanes[kLanes];
    s.store(lanes);
    Acc total = 0;
    for (int64_t i = 0; i < kLanes; ++i) total += lanes[i];
    return total;
  }
  /// The largest lane, or NaN if any lane is NaN.
  static Acc max(const P& p) {
    V s = p.v[0];
    for (int k = 1; k < K; ++k) s = at::vec::maximum(s, p.v[k]);
    __at_align__ Acc lanes[kLanes];
    s.store(lanes);
    Acc top = lanes[0];
    for (int64_t i = 1; i < kLanes; ++i)
      if (lanes[i] > top || std::isnan(lanes[i])) top = lanes[i];
    return top;
  }
};

// Calls f(j, n) for each pack of a row of `cols` elements: j its first
// element, n its length (kWidth but for the last).
template <typename T, typename F>
inline void for_packs(int64_t cols, const F& f) {
  constexpr int64_t w = Lanes<T>::kWidth;
  int64_t j = 0;
  for (; j + w <= cols; j += w) f(j, w);
  if (j < cols) f(j, cols - j);
}

// A sum of packs in two levels: packs add up in a partial sum of at most
// kBlock packs, partial sums add up in the total. Each lane of a plain
// running sum over a row of n elements would add n / lanes terms and lose
// about that many roundings; two levels lose kBlock + n / (lanes kBlock).
template <typename T>
class Accumulator {
 public:
  using L = Lanes<T>;
  static constexpr int kBlock = 64;

  void add(const typename L::P& p) {
    part_ = part_ + p;
    if (++count_ == kBlock) {
      total_ = total_ + part_;
      part_ = L::splat(0);
      count_ = 0;
    }
  }
  [[nodiscard]] typename L::Acc sum() const { return L::sum(total_ + part_); }

 private:
  typename L::P total_ = L::splat(0);
  typename L::P part_ = L::splat(0);
  int count_ = 0;
};

// GELU and its derivative on vectors, the formulas of ../math.hpp.
template <bool kTanh, typename V>
V gelu(const V& x) {
  using A = typename V::value_type;
  const V half(A(0.5)), one(A(1));
  if constexpr (kTanh) {
    const V inner = V(A(math::kSqrt2OverPi)) * (x + V(A(math::kGeluCubic)) * x * x * x);
    return half * x * (one + inner.tanh());
  }
  return half * x * (one + (x * V(A(math::kInvSqrt2))).erf());
}

template <bool kTanh, typename V>
V gelu_grad(const V& x) {
  using A = typename V::value_type;
  const V half(A(0.5)), one(A(1));
  if constexpr (kTanh) {
    const V x2 = x * x;
    const V t = (V(A(math::kSqrt2OverPi)) * (x + V(A(math::kGeluCubic)) * x2 * x)).tanh();
    const V d_inner = V(A(math::kSqrt2OverPi)) * (one + V(A(3 * math::kGeluCubic)) * x2);
    return half * (one + t) + half * x * (one - t * t) * d_inner;
  }
  const V cdf = half * (one + (x * V(A(math::kInvSqrt2))).erf());
  const V pdf = V(A(math::kInvSqrt2Pi)) * (V(A(-0.5)) * x * x).exp();
  return cdf + x * pdf;
}

// ---------------------------------------------------------------- dtype dispatch

template <typename F>
void dispatch(Dtype dtype, const F& f) {
  switch (dtype) {
    case Dtype::float32: return f(float{});
    case Dtype::float64: return f(double{});
    case Dtype::bfloat16: return f(c10::BFloat16{});
    case Dtype::float16: return f(c10::Half{});
  }
}

template <typename T>
const T* in(const void* p) {
  return static_cast<const T*>(p);
}
template <typename T>
T* out(void* p) {
  return static_cast<T*>(p);
}

}  // namespace
}  // namespace CPU_CAPABILITY
}  // namespace runner_kernels::cpu
