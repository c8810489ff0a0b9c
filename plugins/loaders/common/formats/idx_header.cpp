#include "idx_header.hpp"

#include <runner/data_error.hpp>

#include <cstdio>

namespace runner_loaders {

IdxHeader parse_idx_header(const std::uint8_t* b, std::size_t size, std::size_t dims,
                           const std::string& path) {
  using runner::DataError;
  if (size < 4 || b[0] != 0 || b[1] != 0)
    throw DataError("'" + path + "' is not an IDX file: it does not start with two zero bytes");
  if (b[2] != 0x08) {
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", b[2]);
    throw DataError("'" + path + "': byte 2: IDX type code " + code +
                    " is not 0x08 (unsigned bytes), the only type MNIST files use");
  }
  if (b[3] != dims)
    throw DataError("'" + path + "': byte 3: " + std::to_string(b[3]) + " dimensions, expected " +
                    std::to_string(dims));
  IdxHeader idx{{}, 4 + 4 * dims};
  if (size < idx.data)
    throw DataError("'" + path + "' is truncated inside its header (" + std::to_string(size) +
                    " bytes)");
  // Each size is below 2^32, so the sample's product of up to two of them
  // fits, and the whole file's is compared without overflowing.
  std::uint64_t need = 1, sample = 1;
  bool too_big = false;
  std::string text;
  for (std::size_t d = 0; d < dims; ++d) {
    const std::uint8_t* p = b + 4 + 4 * d;
    const std::uint64_t n = (std::uint64_t{p[0]} << 24) | (std::uint64_t{p[1]} << 16) |
                            (std::uint64_t{p[2]} << 8) | p[3];
    idx.shape.push_back(static_cast<std::int64_t>(n));
    // Both products every time: the sample's size is reported even when the
    // file's overflows.
    const bool over = __builtin_mul_overflow(need, n, &need);
    if (d > 0) (void)__builtin_mul_overflow(sample, n, &sample);  // below 2^64: two sizes
    too_big = too_big || over;
    text += (d ? "x" : "") + std::to_string(n);
  }
  if (sample > kMaxIdxSampleBytes)
    throw DataError("'" + path + "': dimensions " + text + " make samples of " +
                    std::to_string(sample) + " bytes, more than the " +
                    std::to_string(kMaxIdxSampleBytes) + " (4096 x 4096) runner reads per sample");
  if (too_big || need < 1 || need != size - idx.data)
    throw DataError("'" + path + "': dimensions " + text + " need " +
                    (too_big ? std::string("more than 2^64")
                             : std::to_string(need + idx.data)) +
                    " bytes, the file has " + std::to_string(size));
  return idx;
}

}  // namespace runner_loaders
