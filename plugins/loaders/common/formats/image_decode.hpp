// JPEG (libjpeg-turbo) and PNG (libpng) decoding for the `image_folder`
// loader, into memory the caller provides once the size is known. No
// LibTorch: the fuzz build runs it on hostile bytes (tests/fuzz/image_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace runner_loaders {

/// The most pixels (height x width, as the file declares them) decoded:
/// 2^26, about 67 megapixels (8192 x 8192), checked before any pixel memory
/// is allocated.
inline constexpr std::uint64_t kMaxImagePixels = std::uint64_t{1} << 26;
/// The most scans of a progressive JPEG decoded (libjpeg-turbo's own tools
/// stop at 500; a hostile file can hold thousands, each a pass over the image).
inline constexpr int kMaxJpegScans = 500;

/// The kind of an image file, by its first bytes.
enum class ImageFormat { jpeg, png, other };
[[nodiscard]] ImageFormat sniff_image(const std::uint8_t* bytes, std::size_t size);

/// Where decoded pixels go: called once with the decoded height, width and
/// channels, returns height x width x channels bytes (row-major, HWC).
using PixelBuffer = std::function<std::uint8_t*(int height, int width, int channels)>;

/// What decode_image did.
struct DecodedImage {
  std::int64_t file_height = 0, file_width = 0;  ///< the size the file declares
  int height = 0, width = 0, channels = 0;       ///< of the pixels written
  double scale = 1;                              ///< JPEG's DCT scaling m/8 (1 otherwise)
};

/// Decodes the `size` bytes at `bytes`: a JPEG to `channels` (1: grayscale,
/// else RGB) at the smallest scale m/8 whose shorter side is still at least
/// `short_side` (0: full size); a PNG always to RGB at full size. An image
/// over `max_pixels` is refused before `out` is called. Throws
/// runner::SampleError naming `path`.
DecodedImage decode_image(const std::uint8_t* bytes, std::size_t size, int channels,
                          int short_side, const PixelBuffer& out, const std::string& path,
                          std::uint64_t max_pixels = kMaxImagePixels);

}  // namespace runner_loaders
