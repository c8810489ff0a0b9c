#include "runner/engine/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

TEST(IndexSampler, EachEpochVisitsEverySampleOnce) {
  runner::IndexSampler sampler(10, 3, /*shuffle=*/true, /*drop_last=*/false, 42);
  std::multiset<std::int64_t> seen;
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 4; ++i) {
    const auto batch = sampler.next();
    sizes.push_back(batch.size());
    seen.insert(batch.begin(), batch.end());
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{3, 3, 3, 1}));
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 10u);
  EXPECT_EQ(sampler.epoch(), 0);
  (void)sampler.next();
  EXPECT_EQ(sampler.epoch(), 1);
}

TEST(IndexSampler, DropLastSkipsTheShortBatch) {
  runner::IndexSampler sampler(10, 4, false, true, 0);
  EXPECT_EQ(sampler.next(), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sampler.next(), (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(sampler.next(), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(sampler.epoch(), 1);
}

TEST(IndexSampler, OrderIsAFunctionOfTheSeed) {
  runner::IndexSampler a(100, 100, true, true, 5), b(100, 100, true, true, 5),
      c(100, 100, true, true, 6);
  const auto first = a.next();
  EXPECT_EQ(first, b.next());
  EXPECT_NE(first, c.next());
  // A new epoch is a new permutation.
  EXPECT_NE(first, a.next());
}

TEST(IndexSampler, RejectsADataSetSmallerThanOneBatch) {
  EXPECT_THROW_MSG(runner::IndexSampler(3, 4, true, true, 0), runner::Error,
                   "the data set has 3 samples, fewer than one batch (4) with drop_last = true");
  runner::IndexSampler ok(3, 4, true, false, 0);
  EXPECT_EQ(ok.next().size(), 3u);
}

TEST(IndexSampler, RanksShareOnePermutationAndTakeDisjointSlices) {
  // 3 ranks x batch 2 = global batch 6 over 14 samples: two global batches
  // per epoch (the last 2 samples are dropped), the same on every rank.
  std::vector<runner::IndexSampler> ranks;
  for (std::int64_t r = 0; r < 3; ++r) ranks.emplace_back(14, 2, true, false, 7, r, 3);
  runner::IndexSampler whole(14, 6, true, true, 7);  // the same permutation, one rank
  for (int step = 0; step < 5; ++step) {
    std::vector<std::int64_t> joined;
    for (auto& rank : ranks) {
      const auto slice = rank.next();
      ASSERT_EQ(slice.size(), 2u);
      joined.insert(joined.end(), slice.begin(), slice.end());
    }
    EXPECT_EQ(joined, whole.next()) << "step " << step;
  }
  EXPECT_EQ(ranks[0].epoch(), 2);
  EXPECT_EQ(ranks[2].epoch(), 2);
}

TEST(IndexSampler, RejectsADataSetSmallerThanOneGlobalBatch) {
  EXPECT_THROW_MSG(runner::IndexSampler(10, 4, true, false, 0, 1, 3), runner::Error,
                   "the data set has 10 samples, fewer than one global batch (3 ranks x 4)");
  EXPECT_THROW_MSG(runner::IndexSampler(10, 2, true, false, 0, 3, 3), runner::Error,
                   "rank 3 is outside a world of 3");
}

}  // namespace
