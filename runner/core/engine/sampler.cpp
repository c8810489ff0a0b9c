#include "runner/core/engine/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "runner/core/common/error.hpp"

namespace runner {

IndexSampler::IndexSampler(std::int64_t size, std::int64_t batch_size, bool shuffle,
                           bool drop_last, std::uint64_t seed)
    : size_(size), batch_size_(batch_size), shuffle_(shuffle), drop_last_(drop_last),
      generator_(seed) {
  if (size_ < 1) throw Error("the data set is empty", {}, ErrorKind::run);
  if (batch_size_ < 1) throw Error("batch_size must be >= 1", {}, ErrorKind::run);
  if (drop_last_ && size_ < batch_size_)
    throw Error("the data set has " + std::to_string(size_) + " samples, fewer than one batch (" +
                    std::to_string(batch_size_) + ") with drop_last = true",
                "lower data.batch_size, grow the data set, or set data.drop_last = false",
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
  std::size_t remaining = order_.size() - position_;
  if (remaining == 0 || (drop_last_ && remaining < batch)) {
    ++epoch_;
    start_epoch();
    remaining = order_.size();
  }
  const std::size_t take = std::min(batch, remaining);
  std::vector<std::int64_t> out(order_.begin() + static_cast<std::ptrdiff_t>(position_),
                                order_.begin() + static_cast<std::ptrdiff_t>(position_ + take));
  position_ += take;
  return out;
}

}  // namespace runner
