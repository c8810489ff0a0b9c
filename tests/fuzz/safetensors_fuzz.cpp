// Fuzz target for the safetensors header check (parse_safetensors_header), the
// part of reading a weights file that trusts nothing in it and needs no
// LibTorch. The input is a whole file. The only acceptable failure is
// runner::Error; a header that passes must describe the file: every entry's
// bytes match its dtype and shape, the entries are sorted by name and tile
// the data exactly. Anything else escaping, a crash, a read past the input,
// more than 1 s or 256 MB for one input is a defect.
//
// Each input is checked twice: as the whole file, and as the start of a file
// longer than the input (the header then must still lie in the bytes given,
// or be refused).
//
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/weights/safetensors.hpp"

namespace {

using runner::weights::SafetensorsHeader;
using runner::weights::TensorEntry;

void check(const SafetensorsHeader& header, std::uint64_t file_size) {
  if (header.data_offset < 8 || header.data_offset > file_size) __builtin_trap();
  const std::uint64_t data = file_size - header.data_offset;
  std::vector<const TensorEntry*> by_offset;
  for (std::size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorEntry& t = header.tensors[i];
    if (i > 0 && !(header.tensors[i - 1].name < t.name)) __builtin_trap();
    if (t.begin > t.end || t.end > data) __builtin_trap();
    // The entry's size, saturating at data + 1 (past any size the data can hold).
    std::uint64_t bytes = runner::weights::dtype_size(t.dtype);
    bool empty = false;
    for (const std::int64_t s : t.shape) {
      if (s < 0) __builtin_trap();
      const auto n = static_cast<std::uint64_t>(s);
      if (n == 0) empty = true;
      else bytes = bytes > (data + 1) / n ? data + 1 : std::min(bytes * n, data + 1);
    }
    if (empty) bytes = 0;
    if (bytes != t.end - t.begin) __builtin_trap();
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  std::uint64_t covered = 0;
  for (const TensorEntry* t : by_offset) {
    if (t->begin != covered) __builtin_trap();
    covered = t->end;
  }
  if (covered != data) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    check(runner::weights::parse_safetensors_header(file, size, "fuzz.safetensors"), size);
  } catch (const runner::Error&) {
  }
  // The same bytes as the start of a longer file: the data then runs past them.
  const std::uint64_t longer = size + 1 + (size > 0 ? data[size - 1] : 0);
  try {
    check(runner::weights::parse_safetensors_header(file, longer, "fuzz.safetensors"), longer);
  } catch (const runner::Error&) {
  }
  return 0;
}
