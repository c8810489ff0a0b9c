// Sample order for the data pipeline: seeded shuffling, batching, epochs (sampler.hpp).
#include "runner/engine/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "runner/common/error.hpp"

namespace runner {

IndexSampler::IndexSampler(std::int64_t size, std::int64_t batch_size, bool shuffle,
                           bool drop_last, std::uint64_t seed, std::int64_t rank,
                           std::int64_t world_size)
    : size_(size), batch_size_(batch_size), rank_(rank), world_size_(world_size),
      shuffle_(shuffle), drop_last_(drop_last || world_size > 1), generator_(seed) {
  if (size_ < 1) throw Error("the data set is empty", {}, ErrorKind::run);
  if (batch_size_ < 1) throw Error("batch_size must be >= 1", {}, ErrorKind::run);
  if (drop_last_ && size_ < batch_size_)
    throw Error("the data set has " + std::to_string(size_) + " samples, fewer than one batch (" +
                    std::to_string(batch_size_) + ") with drop_last = true",
                "lower data.batch_size, grow the data set, or set data.drop_last = false",
                ErrorKind::run);
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_)
    throw Error("rank " + std::to_string(rank_) + " is outside a world of " +
                    std::to_string(world_size_),
                {}, ErrorKind::run);
  if (world_size_ > 1 && size_ < batch_size_ * world_size_)
    throw Error("the data set has " + std::to_string(size_) + " samples, fewer than one global batch (" +
                    std::to_string(world_size_) + " ranks x " + std::to_string(batch_size_) + ")",
                "lower data.batch_size or distributed.world_size, or grow the data set",
                ErrorKind::run);
  order_.resize(static_cast<std::size_t>(size_));
  std::iota(order_.begin(), order_.end(), 0);
  start_epoch();
}

void IndexSampler::start_epoch() {
  position_ = 0;
  if (shuffle_) std::shuffle(order_.begin(), order_.end(), generator_);
}

std::vector<std::int64_t> IndexSampler::next() {
  const auto batch = static_cast<std::size_t>(batch_size_);
  const std::size_t global = batch * static_cast<std::size_t>(world_size_);
  std::size_t remaining = order_.size() - position_;
  if (remaining == 0 || (drop_last_ && remaining < global)) {
    ++epoch_;
    start_epoch();
    remaining = order_.size();
  }
  // world_size > 1 always drops the last partial global batch, so the slice is whole.
  const std::size_t take = std::min(batch, remaining);
  const std::size_t begin = position_ + static_cast<std::size_t>(rank_) * batch;
  std::vector<std::int64_t> out(order_.begin() + static_cast<std::ptrdiff_t>(begin),
                                order_.begin() + static_cast<std::ptrdiff_t>(begin + take));
  position_ += world_size_ > 1 ? global : take;
  return out;
}

}  // namespace runner
