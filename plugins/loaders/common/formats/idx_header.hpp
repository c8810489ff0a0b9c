// The header of an IDX file (MNIST, Fashion-MNIST), parsed and checked
// against the file's size. No LibTorch: the `mnist` loader maps the file and
// uses this; the fuzz build runs it on hostile bytes (tests/fuzz/records_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace runner_loaders {

/// The largest sample of an IDX file (the product of every dimension but
/// the first) in bytes: 4096 x 4096 pixels. A batch copies whole samples.
inline constexpr std::uint64_t kMaxIdxSampleBytes = std::uint64_t{1} << 24;

/// What a checked IDX header says.
struct IdxHeader {
  std::vector<std::int64_t> shape;  ///< `dims` sizes, the first the sample count
  std::size_t data = 0;             ///< byte offset of the data (4 + 4 x dims)
};

/// Parses and checks the `size` bytes at `bytes` (the whole file) as an IDX
/// file of unsigned bytes with `dims` dimensions whose data is exactly the
/// rest of the file, at least one sample, each at most kMaxIdxSampleBytes.
/// Messages name `path`. Throws runner::DataError.
[[nodiscard]] IdxHeader parse_idx_header(const std::uint8_t* bytes, std::size_t size,
                                         std::size_t dims, const std::string& path);

}  // namespace runner_loaders
