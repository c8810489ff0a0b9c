// Fuzz target for the .npy header check (parse_npy_header), what the `npy`
// loader runs on a file before it maps a single row. The input is a whole
// file. The only acceptable failure is runner::DataError; a header that
// passes must describe the file: its data is exactly the rest of the file
// and a row fits the per-sample limit. Anything else escaping, a crash, a
// read past the input, more than 1 s or 256 MB for one input is a defect.
//
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <runner/data_error.hpp>

#include "formats/npy_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy of exactly `size` bytes: ASan then sees any read past the file.
  const std::vector<std::uint8_t> file(data, data + size);
  try {
    const auto h = runner_loaders::parse_npy_header(file.data(), file.size(), "fuzz.npy");
    if (h.shape.empty() || h.data > size || h.item_size == 0) __builtin_trap();
    std::uint64_t bytes = h.item_size;
    for (const std::int64_t d : h.shape) {
      if (d < 0) __builtin_trap();
      bytes *= static_cast<std::uint64_t>(d);  // cannot wrap: the check passed
    }
    if (bytes != size - h.data) __builtin_trap();
    if (h.shape[0] > 0 && h.row_bytes() > runner_loaders::kMaxNpyRowBytes) __builtin_trap();
  } catch (const runner::DataError&) {
  }
  return 0;
}
