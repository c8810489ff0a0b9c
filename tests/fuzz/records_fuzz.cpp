// Fuzz target for the checks of the record files the `cifar`, `mnist` and
// `tokens` loaders map: CIFAR batches, IDX headers and flat token files.
// The first input byte picks the reader and its options, the rest is the
// whole file:
//   0: IDX, 1 dimension (labels)    1: IDX, 3 dimensions (images)
//   2: CIFAR-10                     3: CIFAR-100, coarse labels
//   4: CIFAR-100, fine labels       5: tokens, uint16    6: tokens, uint32
// (the byte modulo 7; for tokens, the next two bytes are the vocabulary,
// little endian, plus 2). The only acceptable failure is runner::DataError;
// what passes must describe the file. Anything else escaping, a crash, a
// read past the input, more than 1 s or 256 MB for one input is a defect.
//
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <cstddef>
#include <cstdint>
#include <vector>

#include <runner/data_error.hpp>

#include "formats/idx_header.hpp"
#include "formats/record_files.hpp"

namespace {

using namespace runner_loaders;

void idx(const std::vector<std::uint8_t>& file, std::size_t dims) {
  const IdxHeader h = parse_idx_header(file.data(), file.size(), dims, "fuzz-idx");
  if (h.shape.size() != dims || h.data != 4 + 4 * dims) __builtin_trap();
  std::uint64_t need = 1, sample = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    need *= static_cast<std::uint64_t>(h.shape[d]);
    if (d > 0) sample *= static_cast<std::uint64_t>(h.shape[d]);
  }
  if (need == 0 || need != file.size() - h.data || sample > kMaxIdxSampleBytes) __builtin_trap();
}

void cifar(const std::vector<std::uint8_t>& file, std::int64_t label_bytes,
           std::int64_t label_offset, std::int64_t classes) {
  const std::int64_t records =
      check_cifar_file(file.data(), file.size(), label_bytes, label_offset, classes, "fuzz.bin");
  const std::int64_t record = label_bytes + kCifarPixels;
  if (records < 1 || records * record != static_cast<std::int64_t>(file.size())) __builtin_trap();
  for (std::int64_t r = 0; r < records; ++r)
    if (file[static_cast<std::size_t>(r * record + label_offset)] >= classes) __builtin_trap();
}

void tokens(const std::vector<std::uint8_t>& file, std::int64_t width, std::int64_t vocab) {
  const std::int64_t total =
      check_token_file(file.data(), file.size(), width, vocab, "fuzz", "fuzz.tokens");
  if (total * width != static_cast<std::int64_t>(file.size())) __builtin_trap();
  for (std::int64_t i = 0; i < total; ++i)
    if (token_at(file.data(), width, i) >= vocab) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 7;
  std::size_t skip = 1;
  std::int64_t vocab = 2;
  if (kind >= 5 && size >= 3) {
    vocab += data[1] | (data[2] << 8);
    skip = 3;
  }
  // A copy of exactly the file's bytes: ASan then sees any read past it.
  const std::vector<std::uint8_t> file(data + skip, data + size);
  try {
    switch (kind) {
      case 0: idx(file, 1); break;
      case 1: idx(file, 3); break;
      case 2: cifar(file, 1, 0, 10); break;
      case 3: cifar(file, 2, 0, 20); break;
      case 4: cifar(file, 2, 1, 100); break;
      case 5: tokens(file, 2, vocab); break;
      default: tokens(file, 4, vocab); break;
    }
  } catch (const runner::DataError&) {
  }
  return 0;
}
