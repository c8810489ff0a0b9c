// The reduction states of the CUDA row kernels and how two of them combine.
// Plain arithmetic, __host__ __device__ (math.hpp's macro): the kernels fold
// them per thread and across a warp or block, and the CPU unit test
// (tests/plugins/kernels/cuda_reduce_ops_test.cpp) checks the algebra on the host,
// where it can run without a GPU. Every state is a trivial aggregate so that
// it can live in __shared__ memory.
#pragma once

#include "../math.hpp"

#include <cmath>

namespace runner_kernels::cuda {

/// Two sums reduced together (one pass, one cross-thread reduction).
template <typename Acc>
struct Sum2 {
  Acc a;
  Acc b;
};

template <typename Acc>
RUNNER_KERNELS_HD Sum2<Acc> combine(const Sum2<Acc>& x, const Sum2<Acc>& y) {
  return {x.a + y.a, x.b + y.b};
}

/// Online softmax: the running maximum m of the values seen and
/// s = sum(exp(v - m)) over them. The identity is {-inf, 0}.
template <typename Acc>
struct MaxSum {
  Acc max;
  Acc sum;
};

template <typename Acc>
RUNNER_KERNELS_HD MaxSum<Acc> max_sum_identity() {
  return {-static_cast<Acc>(INFINITY), Acc(0)};
}

/// Adds one value with a single exp, of -|v - m|: either v raises the
/// maximum (the old sum is rescaled by exp(m - v) and v contributes
/// exp(0) = 1) or it does not (it contributes exp(v - m)). While m is -inf
/// and v does not raise it, v is -inf too (or NaN) and contributes nothing,
/// so that a row that starts with -inf (a masked position) never computes
/// exp(-inf - -inf) = NaN.
template <typename Acc>
RUNNER_KERNELS_HD MaxSum<Acc> push(MaxSum<Acc> state, Acc v) {
  using std::exp;
  const bool raises = v > state.max;
  if (!raises && state.max == -static_cast<Acc>(INFINITY)) return state;
  const Acc e = exp(raises ? state.max - v : v - state.max);
  if (raises) {
    state.sum = state.sum * e + Acc(1);
    state.max = v;
  } else {
    state.sum += e;
  }
  return state;
}

/// Merges two partial states: the side with the smaller maximum has its sum
/// rescaled to the larger one (a single exp, of a value <= 0). A side that saw
/// no value above -inf (sum 0) adds nothing, again avoiding
/// exp(-inf - -inf).
template <typename Acc>
RUNNER_KERNELS_HD MaxSum<Acc> combine(const MaxSum<Acc>& x, const MaxSum<Acc>& y) {
  using std::exp;
  const bool x_larger = x.max >= y.max;
  const Acc m = x_larger ? x.max : y.max;
  const Acc other_max = x_larger ? y.max : x.max;
  const Acc other_sum = x_larger ? y.sum : x.sum;
  const Acc own_sum = x_larger ? x.sum : y.sum;
  if (other_max == -static_cast<Acc>(INFINITY)) return {m, own_sum};
  return {m, own_sum + other_sum * exp(other_max - m)};
}

/// Welford's running mean and sum of squared deviations (m2) over n values;
/// the identity is {0, 0, 0}. n is kept in Acc: exact up to 2^24 values per
/// thread in float, far beyond what one thread folds.
template <typename Acc>
struct Welford {
  Acc n;
  Acc mean;
  Acc m2;
};

template <typename Acc>
RUNNER_KERNELS_HD Welford<Acc> push(Welford<Acc> state, Acc v) {
  state.n += Acc(1);
  const Acc delta = v - state.mean;
  state.mean += delta / state.n;
  state.m2 += delta * (v - state.mean);
  return state;
}

/// Chan et al.'s parallel merge. Either side may be empty (a thread that saw
/// no column of a short row).
template <typename Acc>
RUNNER_KERNELS_HD Welford<Acc> combine(const Welford<Acc>& x, const Welford<Acc>& y) {
  if (y.n == Acc(0)) return x;
  if (x.n == Acc(0)) return y;
  const Acc n = x.n + y.n;
  const Acc delta = y.mean - x.mean;
  const Acc wy = y.n / n;
  return {n, x.mean + delta * wy, x.m2 + y.m2 + delta * delta * x.n * wy};
}

}  // namespace runner_kernels::cuda
