// Sample order for the data pipeline: seeded shuffling, batching, epochs.
// No LibTorch, so its logic is unit-tested cheaply.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace runner {

/// Yields batches of sample indices over [0, size), epoch after epoch. With
/// shuffle, each epoch is a fresh permutation drawn from a generator seeded
/// once with `seed`, so the order is a function of the seed alone.
///
/// Data-parallel runs shard each epoch like PyTorch's DistributedSampler:
/// every rank draws the same permutation (same seed), a step consumes one
/// global batch of world_size x batch_size samples, and rank r takes its r-th
/// slice. An epoch ends when a whole global batch no longer fits (every rank
/// must take a step), whatever drop_last says.
class IndexSampler {
 public:
  /// Throws runner::Error (run kind) when no full batch fits and drop_last is
  /// set, or, with world_size > 1, when no full global batch fits.
  IndexSampler(std::int64_t size, std::int64_t batch_size, bool shuffle, bool drop_last,
               std::uint64_t seed, std::int64_t rank = 0, std::int64_t world_size = 1);

  /// The next batch of indices (the last batch of an epoch may be short unless drop_last).
  std::vector<std::int64_t> next();
  /// Completed epochs so far.
  [[nodiscard]] std::int64_t epoch() const { return epoch_; }

 private:
  void start_epoch();

  std::int64_t size_;
  std::int64_t batch_size_;
  std::int64_t rank_;
  std::int64_t world_size_;
  bool shuffle_;
  bool drop_last_;
  std::mt19937_64 generator_;
  std::vector<std::int64_t> order_;
  std::size_t position_ = 0;
  std::int64_t epoch_ = 0;
};

}  // namespace runner
