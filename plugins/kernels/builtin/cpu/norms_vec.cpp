// The row norms of the CPU kernels (rmsnorm, layernorm and their backward
// passes, with the per-block partial sums of the weight gradients), compiled
// once per instruction set like kernels_vec.cpp, whose table points here.
#include <memory>

#include "vec_common.hpp"

namespace runner_kernels::cpu {
namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using std::int64_t;

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

}  // namespace

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

}  // namespace CPU_CAPABILITY
}  // namespace runner_kernels::cpu
