// Fuzz target for image decoding as the `image_folder` loader does it
// (decode_image: libjpeg-turbo, libpng). The first input byte picks the
// options (bit 0: one channel; bits 1-2: short_side 0, 8, 32 or 224), the
// rest is the whole file. The only acceptable failure is runner::SampleError;
// a decoded image must fill exactly the memory it asked for, at the size its
// file declares (or a JPEG's DCT scale of it). Anything else escaping, a
// crash, a read past the input, more than 1 s or 256 MB for one input is a
// defect.
//
// The fuzz build caps images at 2^22 pixels (4 megapixels) instead of the
// loader's 2^26: the cap itself is tested by ImageDecode.* in the normal
// build, and decoding 67 megapixels under ASan takes longer than the 1 s an
// input may take.
//
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <runner/data_error.hpp>

#include "formats/image_decode.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  constexpr std::uint64_t kFuzzMaxPixels = std::uint64_t{1} << 22;
  const int channels = (data[0] & 1) != 0 ? 1 : 3;
  constexpr int kShortSides[4] = {0, 8, 32, 224};
  const int short_side = kShortSides[(data[0] >> 1) & 3];
  // A copy of exactly the file's bytes: ASan then sees any read past it.
  const std::vector<std::uint8_t> file(data + 1, data + size);
  std::vector<std::uint8_t> pixels;
  int calls = 0;
  try {
    const auto image = runner_loaders::decode_image(
        file.data(), file.size(), channels, short_side,
        [&](int height, int width, int components) {
          ++calls;
          if (height < 1 || width < 1 || components < 1 || components > 3) __builtin_trap();
          pixels.resize(static_cast<std::size_t>(height) * static_cast<std::size_t>(width) *
                        static_cast<std::size_t>(components));
          return pixels.data();
        },
        "fuzz-image", kFuzzMaxPixels);
    if (calls != 1) __builtin_trap();
    if (static_cast<std::uint64_t>(image.file_height) * static_cast<std::uint64_t>(image.file_width) >
        kFuzzMaxPixels)
      __builtin_trap();
    if (image.width != static_cast<int>(std::ceil(static_cast<double>(image.file_width) * image.scale)) ||
        image.height != static_cast<int>(std::ceil(static_cast<double>(image.file_height) * image.scale)))
      __builtin_trap();
    if (pixels.size() != static_cast<std::size_t>(image.height) * static_cast<std::size_t>(image.width) *
                             static_cast<std::size_t>(image.channels))
      __builtin_trap();
  } catch (const runner::SampleError&) {
  }
  return 0;
}
