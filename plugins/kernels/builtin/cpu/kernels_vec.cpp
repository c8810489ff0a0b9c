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
// The one source file over the project's 600 lines (docs/architecture.md):
// every file here is compiled once per instruction set, so splitting it
// would multiply those compiles by the pieces, and its kernels share the
// load/store and reduction helpers at the top, which would move to a header
// that every piece then parses three times.
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
#error "kernels_vec.cpp is compiled with CPU_CAPABILITY=DEFAULT, AVX2 or AVX512"
#endif

namespace runner_kernels::cpu {
namespace CPU_CAPABILITY {
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

// ---------------------------------------------------------------- norms

// Sum over a row of f(j, n) (a pack whose lanes past n are zero).
template <typename T, typename F>
typename Lanes<T>::Acc row_sum(int64_t cols, const F& f) {
  Accumulator<T> total;
  for_packs<T>(cols, [&](int64_t j, int64_t n) { total.add(f(j, n)); });
  return total.sum();
}

template <typename T>
typename Lanes<T>::Acc rms_inverse(const T* xr, int64_t cols, double eps) {
  using L = Lanes<T>;
  using Acc = typename L::Acc;
  const Acc squares = row_sum<T>(cols, [&](int64_t j, int64_t n) {
    const auto v = L::load(xr + j, n);
    return v * v;
  });
  return Acc(1) / std::sqrt(squares / static_cast<Acc>(cols) + static_cast<Acc>(eps));
}

// Mean and 1/sqrt(biased variance + eps) of a row, in two passes (the
// second over the deviations from the mean, which keeps the variance exact
// for rows far from zero); the row is in cache for the second.
template <typename T>
std::pair<typename Lanes<T>::Acc, typename Lanes<T>::Acc> moments(const T* xr, int64_t cols,
                                                                double eps) {
  using L = Lanes<T>;
  using Acc = typename L::Acc;
  using V = typename L::V;
  const Acc mean = row_sum<T>(cols, [&](int64_t j, int64_t n) { return L::load(xr + j, n); }) /
                   static_cast<Acc>(cols);
  const V vmean(mean);
  const Acc squares = row_sum<T>(cols, [&](int64_t j, int64_t n) {
    const auto d = L::masked(L::load(xr + j, n) - vmean, n, 0);
    return d * d;
  });
  return {mean, Acc(1) / std::sqrt(squares / static_cast<Acc>(cols) + static_cast<Acc>(eps))};
}

template <typename T>
void rmsnorm_kernel(const T* x, const T* weight, T* y, int64_t rows, int64_t cols, double eps) {
  using L = Lanes<T>;
  using V = typename L::V;
  const bool streaming = streamed<T>(rows * cols);
  at::parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      const V inverse(rms_inverse(xr, cols, eps));
      const bool next = r + 1 < r1;
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        if (next) prefetch(xr + cols + j);
        L::store(yr + j, L::load(xr + j, n) * inverse * L::load(weight + j, n), n, streaming);
      });
    }
    end_streaming(streaming);
  });
}

template <typename T>
void layernorm_kernel(const T* x, const T* weight, const T* bias, T* y, int64_t rows,
                      int64_t cols, double eps) {
  using L = Lanes<T>;
  using V = typename L::V;
  const bool streaming = streamed<T>(rows * cols);
  at::parallel_for(0, rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      const auto [mean, inverse] = moments(xr, cols, eps);
      const V vmean(mean), vinverse(inverse);
      const bool next = r + 1 < r1;
      for_packs<T>(cols, [&](int64_t j, int64_t n) {
        if (next) prefetch(xr + cols + j);
        const auto normal = (L::load(xr + j, n) - vmean) * vinverse;
        L::store(yr + j, normal * L::load(weight + j, n) + L::load(bias + j, n), n, streaming);
      });
    }
    end_streaming(streaming);
  });
}

// The weight (and bias) gradients are sums over rows. Rows are split into
// a fixed number of blocks (one per thread, or one for a small call); each
// block sums its rows into its own partial sums in the accumulation type,
// and the blocks' partial sums are added up at the end. The result depends
// on the thread count, not on scheduling. Within a block, as Accumulator
// does along a row, rows add up in a second row of sums that is folded
// into the block's every kRowsPerFold rows.
struct Blocks {
  int64_t count;
  int64_t rows_per_block;
};

constexpr int64_t kRowsPerFold = 64;

Blocks blocks_of(int64_t rows, int64_t cols) {
  int64_t count = rows * cols < kGrain ? 1 : std::min<int64_t>(rows, at::get_num_threads());
  count = std::max<int64_t>(count, 1);
  return {count, (rows + count - 1) / count};
}

// Per-column sums of one block's rows: `total` and `recent` are row buffers.
template <typename T>
class ColumnSums {
 public:
  using L = Lanes<T>;
  using Acc = typename L::Acc;

  ColumnSums(Acc* total, Acc* recent, int64_t cols) : total_(total), recent_(recent), cols_(cols) {
    std::fill(total_, total_ + cols_, Acc(0));
    std::fill(recent_, recent_ + cols_, Acc(0));
  }
  /// Adds a pack of the current row at column j (n columns).
  void add(int64_t j, const typename L::P& p, int64_t n) {
    L::store_acc(recent_ + j, L::load_acc(recent_ + j, n) + p, n);
  }
  /// Ends a row.
  void next_row() {
    if (++rows_ == kRowsPerFold) fold();
  }
  /// Folds the recent rows into the total.
  void fold() {
    for_packs<T>(cols_, [&](int64_t j, int64_t n) {
      L::store_acc(total_ + j, L::load_acc(total_ + j, n) + L::load_acc(recent_ + j, n), n);
    });
    std::fill(recent_, recent_ + cols_, Acc(0));
    rows_ = 0;
  }

 private:
  Acc* total_;
  Acc* recent_;
  int64_t cols_;
  int64_t rows_ = 0;
};

// Writes the column sums of the blocks' totals (block b's at partials +
// b * stride) to `out` in T.
template <typename T>
void sum_blocks(const typename Lanes<T>::Acc* partials, int64_t blocks, int64_t stride,
                int64_t cols, T* out) {
  using L = Lanes<T>;
  at::parallel_for(0, cols, kGrain, [&](int64_t c0, int64_t c1) {
    for (int64_t j = c0; j < c1; j += L::kWidth) {
      const int64_t n = std::min<int64_t>(L::kWidth, c1 - j);
      auto total = L::load_acc(partials + j, n);
      for (int64_t b = 1; b < blocks; ++b) total = total + L::load_acc(partials + b * stride + j, n);
      L::store(out + j, total, n);
    }
  });
}

template <typename T>
void rmsnorm_backward_kernel(const T* grad, const T* x, const T* weight, T* dx, T* dweight,
                             int64_t rows, int64_t cols, double eps) {
  using L = Lanes<T>;
  using Acc = typename L::Acc;
  using V = typename L::V;
  const Blocks blocks = blocks_of(rows, cols);
  // Per block: the weight gradient's total and recent rows.
  const int64_t stride = 2 * cols;
  const auto partials = std::make_unique<Acc[]>(static_cast<std::size_t>(blocks.count * stride));
  at::parallel_for(0, blocks.count, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      Acc* mine = partials.get() + b * stride;
      ColumnSums<T> dw(mine, mine + cols, cols);
      const int64_t end = std::min(rows, (b + 1) * blocks.rows_per_block);
      for (int64_t r = b * blocks.rows_per_block; r < end; ++r) {
        const int64_t o = r * cols;
        const Acc inverse = rms_inverse(x + o, cols, eps);
        const V vinverse(inverse);
        // mean over the row of (grad * weight) * xhat, with xhat = x * inverse.
        const Acc dot = row_sum<T>(cols, [&](int64_t j, int64_t n) {
          return L::load(grad + o + j, n) * L::load(weight + j, n) * L::load(x + o + j, n);
        });
        const V projection(dot * inverse * inverse / static_cast<Acc>(cols));
        for_packs<T>(cols, [&](int64_t j, int64_t n) {
          const auto g = L::load(grad + o + j, n);
          const auto xr = L::load(x + o + j, n);
          const auto gw = g * L::load(weight + j, n);
          L::store(dx + o + j, (gw - xr * projection) * vinverse, n);
          dw.add(j, g * xr * vinverse, n);
        });
        dw.next_row();
      }
      dw.fold();
    }
  });
  sum_blocks<T>(partials.get(), blocks.count, stride, cols, dweight);
}

template <typename T>
void layernorm_backward_kernel(const T* grad, const T* x, const T* weight, T* dx, T* dweight,
                               T* dbias, int64_t rows, int64_t cols, double eps) {
  using L = Lanes<T>;
  using Acc = typename L::Acc;
  using V = typename L::V;
  const Blocks blocks = blocks_of(rows, cols);
  // Per block: the weight gradient's total and recent rows, then the bias's.
  const int64_t stride = 4 * cols;
  const auto partials = std::make_unique<Acc[]>(static_cast<std::size_t>(blocks.count * stride));
  at::parallel_for(0, blocks.count, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      Acc* mine = partials.get() + b * stride;
      ColumnSums<T> dw(mine, mine + cols, cols);
      ColumnSums<T> db(mine + 2 * cols, mine + 3 * cols, cols);
      const int64_t end = std::min(rows, (b + 1) * blocks.rows_per_block);
      for (int64_t r = b * blocks.rows_per_block; r < end; ++r) {
        const int64_t o = r * cols;
        const auto [mean, inverse] = moments(x + o, cols, eps);
        const V vmean(mean), vinverse(inverse);
        // The means over the row of gw = grad * weight and of gw * xhat.
        Accumulator<T> sum_gw, sum_gw_xhat;
        for_packs<T>(cols, [&](int64_t j, int64_t n) {
          const auto gw = L::load(grad + o + j, n) * L::load(weight + j, n);
          const auto xhat = (L::load(x + o + j, n) - vmean) * vinverse;
          sum_gw.add(gw);
          sum_gw_xhat.add(gw * xhat);
        });
        const V mean_gw(sum_gw.sum() / static_cast<Acc>(cols));
        const V mean_gw_xhat(sum_gw_xhat.sum() / static_cast<Acc>(cols));
        for_packs<T>(cols, [&](int64_t j, int64_t n) {
          const auto g = L::load(grad + o + j, n);
          const auto xhat = (L::load(x + o + j, n) - vmean) * vinverse;
          const auto gw = g * L::load(weight + j, n);
          L::store(dx + o + j, ((gw - mean_gw) - xhat * mean_gw_xhat) * vinverse, n);
          dw.add(j, g * xhat, n);
          db.add(j, g, n);
        });
        dw.next_row();
        db.next_row();
      }
      dw.fold();
      db.fold();
    }
  });
  sum_blocks<T>(partials.get(), blocks.count, stride, cols, dweight);
  sum_blocks<T>(partials.get() + 2 * cols, blocks.count, stride, cols, dbias);
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

void rmsnorm(Dtype dtype, const void* x, const void* weight, void* y, int64_t rows, int64_t cols,
             double eps) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_kernel(in<T>(x), in<T>(weight), out<T>(y), rows, cols, eps);
  });
}

void rmsnorm_backward(Dtype dtype, const void* grad, const void* x, const void* weight, void* dx,
                      void* dweight, int64_t rows, int64_t cols, double eps) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_backward_kernel(in<T>(grad), in<T>(x), in<T>(weight), out<T>(dx), out<T>(dweight),
                            rows, cols, eps);
  });
}

void layernorm(Dtype dtype, const void* x, const void* weight, const void* bias, void* y,
               int64_t rows, int64_t cols, double eps) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    layernorm_kernel(in<T>(x), in<T>(weight), in<T>(bias), out<T>(y), rows, cols, eps);
  });
}

void layernorm_backward(Dtype dtype, const void* grad, const void* x, const void* weight,
                        void* dx, void* dweight, void* dbias, int64_t rows, int64_t cols,
                        double eps) {
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    layernorm_backward_kernel(in<T>(grad), in<T>(x), in<T>(weight), out<T>(dx), out<T>(dweight),
                              out<T>(dbias), rows, cols, eps);
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
