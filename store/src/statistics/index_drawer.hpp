// Unbiased random indices from a seeded std::mt19937_64, shared by the
// bootstrap (resamples) and the change-point permutation test (shuffles).
// std::uniform_int_distribution is not used because it is
// implementation-defined: results would differ between libstdc++ and libc++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

namespace runner::store::detail {

// Indices in [0, n), two per 64-bit draw, by Lemire's multiply-and-reject
// method (no division on the common path: a bootstrap draws hundreds of
// thousands of indices per comparison).
class IndexDrawer {
 public:
  explicit IndexDrawer(std::uint64_t seed) : rng_(seed) {}

  /// Uniform in [0, n); n must be in [1, 2^32).
  std::size_t draw(std::uint32_t n) {
    std::uint64_t m = std::uint64_t{next32()} * n;
    auto low = static_cast<std::uint32_t>(m);
    if (low < n) {
      const std::uint32_t threshold = (0U - n) % n;  // 2^32 mod n
      while (low < threshold) {
        m = std::uint64_t{next32()} * n;
        low = static_cast<std::uint32_t>(m);
      }
    }
    return static_cast<std::size_t>(m >> 32);
  }

 private:
  std::uint32_t next32() {
    if (have_high_) {
      have_high_ = false;
      return static_cast<std::uint32_t>(buffer_ >> 32);
    }
    buffer_ = rng_();
    have_high_ = true;
    return static_cast<std::uint32_t>(buffer_);
  }

  std::mt19937_64 rng_;
  std::uint64_t buffer_ = 0;
  bool have_high_ = false;
};

}  // namespace runner::store::detail
