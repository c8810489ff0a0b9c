// The reduction algebra of the CUDA row kernels (plugins/kernels/builtin/cuda/
// reduce_ops.hpp), run on the host: the same __host__ __device__ code the
// kernels fold per thread and merge across a warp or block, checked where it
// can run without a GPU. And the workspace sizing of the norm backwards
// (launch.hpp), in a CUDA build.
#include <gtest/gtest.h>

#include "kernels/builtin/cuda/reduce_ops.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#if defined(RUNNER_WITH_CUDA)
#include "kernels/builtin/cuda/launch.hpp"
#endif

namespace {

namespace kc = runner_kernels::cuda;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_values(std::size_t n, double mean, double spread, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(mean, spread);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

// The states a group of `threads` threads holds after each folded the
// columns t, t + threads, ... (the kernels' column loop), merged pairwise in
// the xor-butterfly order of warp_allreduce as lane 0 sees it.
template <typename State, typename Push>
State fold_like_a_group(const std::vector<double>& row, int threads, State identity, Push push) {
  std::vector<State> lanes(static_cast<std::size_t>(threads), identity);
  for (std::size_t c = 0; c < row.size(); ++c) {
    State& s = lanes[c % static_cast<std::size_t>(threads)];
    s = push(s, row[c]);
  }
  for (int m = threads / 2; m > 0; m /= 2) {
    std::vector<State> next = lanes;
    for (int lane = 0; lane < threads; ++lane)
      next[static_cast<std::size_t>(lane)] =
          kc::combine(lanes[static_cast<std::size_t>(lane)], lanes[static_cast<std::size_t>(lane ^ m)]);
    lanes = next;
  }
  return lanes[0];
}

kc::MaxSum<double> softmax_state(const std::vector<double>& row, int threads) {
  return fold_like_a_group(row, threads, kc::max_sum_identity<double>(),
                           [](kc::MaxSum<double> s, double v) { return kc::push(s, v); });
}

kc::Welford<double> welford_state(const std::vector<double>& row, int threads) {
  return fold_like_a_group(row, threads, kc::Welford<double>{0, 0, 0},
                           [](kc::Welford<double> s, double v) { return kc::push(s, v); });
}

TEST(CudaReduceOps, OnlineSoftmaxGivesTheMaximumAndTheShiftedSum) {
  for (const std::size_t cols : {1u, 7u, 33u, 1000u, 4097u}) {
    const auto row = random_values(cols, 3.0, 10.0, static_cast<unsigned>(cols));
    double max = -kInf;
    for (double v : row) max = std::max(max, v);
    double sum = 0;
    for (double v : row) sum += std::exp(v - max);
    for (const int threads : {1, 32, 256}) {
      const auto s = softmax_state(row, threads);
      EXPECT_EQ(s.max, max) << cols << " columns, " << threads << " threads";
      EXPECT_NEAR(s.sum, sum, 1e-12 * sum) << cols << " columns, " << threads << " threads";
    }
  }
}

TEST(CudaReduceOps, OnlineSoftmaxOfHugeValuesDoesNotOverflow) {
  // exp(1000) overflows a double; every exponent the state takes is <= 0.
  const std::vector<double> row{1000.0, 999.0, 998.0};
  const auto s = softmax_state(row, 32);
  EXPECT_EQ(s.max, 1000.0);
  EXPECT_NEAR(s.sum, 1 + std::exp(-1.0) + std::exp(-2.0), 1e-15);
}

TEST(CudaReduceOps, OnlineSoftmaxSkipsMaskedPositions) {
  // A masked row starts with -inf: no exp(-inf - -inf) = NaN on the way.
  const std::vector<double> row{-kInf, -kInf, 2.0, -kInf, 1.0};
  for (const int threads : {1, 2, 32}) {
    const auto s = softmax_state(row, threads);
    EXPECT_EQ(s.max, 2.0) << threads;
    EXPECT_NEAR(s.sum, 1 + std::exp(-1.0), 1e-15) << threads;
  }
  // All -inf: the identity (sum 0, so the kernel's 1/sum gives NaN, as ATen's softmax).
  const auto masked = softmax_state({-kInf, -kInf, -kInf}, 32);
  EXPECT_EQ(masked.max, -kInf);
  EXPECT_EQ(masked.sum, 0.0);
}

TEST(CudaReduceOps, OnlineSoftmaxMergeWithAnEmptySideIsExact) {
  const kc::MaxSum<double> a{1.5, 2.25};
  const auto left = kc::combine(a, kc::max_sum_identity<double>());
  const auto right = kc::combine(kc::max_sum_identity<double>(), a);
  EXPECT_EQ(left.max, 1.5);
  EXPECT_EQ(left.sum, 2.25);
  EXPECT_EQ(right.max, 1.5);
  EXPECT_EQ(right.sum, 2.25);
}

TEST(CudaReduceOps, WelfordGivesTheMeanAndSquaredDeviationsOfAnyGrouping) {
  for (const std::size_t cols : {1u, 7u, 33u, 1000u, 4097u}) {
    // A large mean and a small spread: where a one-pass sum of squares fails.
    const auto row = random_values(cols, 1e4, 0.5, static_cast<unsigned>(cols) + 1);
    double mean = 0;
    for (double v : row) mean += v;
    mean /= static_cast<double>(cols);
    double m2 = 0;
    for (double v : row) m2 += (v - mean) * (v - mean);
    for (const int threads : {1, 32, 256}) {
      const auto s = welford_state(row, threads);
      EXPECT_EQ(s.n, static_cast<double>(cols)) << cols << " columns, " << threads << " threads";
      EXPECT_NEAR(s.mean, mean, 1e-12 * std::abs(mean)) << cols << ", " << threads;
      EXPECT_NEAR(s.m2, m2, 1e-9 * m2 + 1e-12) << cols << ", " << threads;
    }
  }
}

TEST(CudaReduceOps, WelfordInFloatKeepsTheVarianceOfAnOffsetRow) {
  // Float accumulation (the kernels' for float, half and bfloat16) of values
  // 1000 + {0.1, 0.2, ...}: the variance survives the offset.
  // The reference is computed in double from the float-rounded values, so
  // that only the accumulation differs.
  std::vector<double> row;
  for (int i = 0; i < 4096; ++i)
    row.push_back(static_cast<float>(1000.0 + 0.001 * (i % 100)));
  double mean = 0;
  for (double v : row) mean += v;
  mean /= static_cast<double>(row.size());
  double var = 0;
  for (double v : row) var += (v - mean) * (v - mean);
  var /= static_cast<double>(row.size());
  std::vector<kc::Welford<float>> lanes(32, kc::Welford<float>{0, 0, 0});
  for (std::size_t c = 0; c < row.size(); ++c)
    lanes[c % 32] = kc::push(lanes[c % 32], static_cast<float>(row[c]));
  kc::Welford<float> total{0, 0, 0};
  for (const auto& lane : lanes) total = kc::combine(total, lane);
  EXPECT_NEAR(total.m2 / total.n, var, 1e-3 * var);
}

TEST(CudaReduceOps, WelfordMergeWithAnEmptySideIsExact) {
  const kc::Welford<double> a{3, 2.5, 0.75};
  const kc::Welford<double> empty{0, 0, 0};
  const auto left = kc::combine(a, empty);
  const auto right = kc::combine(empty, a);
  EXPECT_EQ(left.n, 3);
  EXPECT_EQ(left.mean, 2.5);
  EXPECT_EQ(left.m2, 0.75);
  EXPECT_EQ(right.n, 3);
  EXPECT_EQ(right.mean, 2.5);
  EXPECT_EQ(right.m2, 0.75);
  const auto none = kc::combine(empty, empty);
  EXPECT_EQ(none.n, 0);
}

TEST(CudaReduceOps, PairedSumsAddComponentwise) {
  const auto s = kc::combine(kc::Sum2<double>{1, 2}, kc::Sum2<double>{10, 20});
  EXPECT_EQ(s.a, 11);
  EXPECT_EQ(s.b, 22);
}

#if defined(RUNNER_WITH_CUDA)
TEST(CudaReduceOps, WeightGradChunksCoverTheRowsWithinTheirBounds) {
  for (const std::int64_t rows : {1, 63, 64, 1000, 100000, 10000000}) {
    for (const std::int64_t cols : {1, 7, 33, 1000, 4097, 100000}) {
      for (const int sms : {1, 108, 132}) {
        const std::int64_t chunks = kc::weight_grad_chunks(rows, cols, sms);
        ASSERT_GE(chunks, 1);
        ASSERT_LE(chunks, 1024);
        // The launcher's split: chunk k takes rows [k * per, (k + 1) * per).
        const std::int64_t per = (rows + chunks - 1) / chunks;
        EXPECT_GE(per * chunks, rows) << rows << " x " << cols << ", " << sms << " SMs";
        // At least 64 rows per chunk once there are that many.
        if (rows >= 64) {
          EXPECT_GE(rows / chunks, 64) << rows << " x " << cols;
        }
        // Wide rows fill the device with column tiles alone: one chunk.
        if ((cols + 31) / 32 >= 4 * sms) {
          EXPECT_EQ(chunks, 1) << rows << " x " << cols;
        }
        EXPECT_EQ(kc::norm_partials_size(true, rows, cols, sms), 2 * chunks * cols);
      }
    }
  }
  EXPECT_EQ(kc::norm_stats_size(false, 10), 10);
  EXPECT_EQ(kc::norm_stats_size(true, 10), 20);
  EXPECT_EQ(kc::acc_bytes(kc::DType::float64), 8);
  EXPECT_EQ(kc::acc_bytes(kc::DType::bfloat16), 4);
}
#endif

}  // namespace
