// The header of a NumPy .npy file (as np.save writes it), parsed and checked
// against the file's size. No LibTorch: the `npy` loader maps the file and
// uses this; the fuzz build runs it on hostile bytes (tests/fuzz/npy_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace runner_loaders {

/// The longest header accepted, in bytes (np.save writes a few hundred;
/// NumPy's own reader refuses more than 10,000 unless told otherwise).
inline constexpr std::size_t kMaxNpyHeaderBytes = 65536;
/// The most dimensions accepted (NumPy's own limit, NPY_MAXDIMS, is 64).
inline constexpr std::size_t kMaxNpyDims = 32;
/// The largest sample (one row: every dimension but the first) in bytes:
/// a batch copies whole rows, so a larger row cannot be trained on.
inline constexpr std::uint64_t kMaxNpyRowBytes = std::uint64_t{1} << 30;

/// What a checked header says.
struct NpyHeader {
  std::string descr;               ///< "<f4", "|u1", ... (one of the supported)
  std::size_t item_size = 0;       ///< bytes per element
  std::vector<std::int64_t> shape; ///< at least one dimension
  std::size_t data = 0;            ///< byte offset of the data
  [[nodiscard]] std::uint64_t row_bytes() const;
};

/// The dtypes the loader reads, as "<f4, |u1, ...".
[[nodiscard]] std::string npy_supported_dtypes();

/// Parses and checks the header of the `size` bytes at `bytes` (the whole
/// file): magic, version, header length, dtype, C order, a shape of sizes
/// whose data is exactly the rest of the file, rows of at most
/// kMaxNpyRowBytes. Messages name `path`. Throws runner::DataError.
[[nodiscard]] NpyHeader parse_npy_header(const std::uint8_t* bytes, std::size_t size,
                                         const std::string& path);

}  // namespace runner_loaders
