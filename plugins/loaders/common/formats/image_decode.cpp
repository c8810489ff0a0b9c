#include "image_decode.hpp"

#include <runner/data_error.hpp>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

// jpeglib.h uses size_t and FILE without including their headers.
#include <jpeglib.h>
// jerror.h after jpeglib.h: the message codes (JWRN_JPEG_EOF).
#include <jerror.h>
#include <png.h>

namespace runner_loaders {
namespace {

using runner::SampleError;

// libjpeg reports errors through a callback that must not return: it jumps
// back to decode_jpeg's setjmp with the message. Everything the decoder
// touches lives in this struct, outside the jumping frame.
struct JpegJob {
  jpeg_decompress_struct info{};
  jpeg_error_mgr errors{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool too_large = false;
};

[[noreturn]] void jpeg_fail(j_common_ptr info) {
  auto* job = static_cast<JpegJob*>(info->client_data);
  (*info->err->format_message)(info, job->message);
  std::longjmp(job->jump, 1);
}
// Warnings (extraneous bytes, a corrupt segment) are not errors, as for PIL,
// except a file that ends early: libjpeg would fill the rest with grey and
// carry on, where PIL refuses it as truncated. So does this loader.
void jpeg_warning(j_common_ptr info, int level) {
  if (level == -1 && info->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(info);
}
// Called between scans: a progressive file of thousands of tiny scans would
// take minutes to decode.
void jpeg_progress(j_common_ptr info) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(info);
  if (d->input_scan_number <= kMaxJpegScans) return;
  auto* job = static_cast<JpegJob*>(info->client_data);
  std::snprintf(job->message, sizeof job->message, "it has more than %d progressive scans",
                kMaxJpegScans);
  std::longjmp(job->jump, 1);
}

std::string pixels_text(std::uint64_t height, std::uint64_t width, std::uint64_t max_pixels) {
  return std::to_string(width) + " x " + std::to_string(height) + " pixels, more than the " +
         std::to_string(max_pixels) + " runner decodes";
}

// Decodes into `out`; false (with job->message) on a corrupt file, or one
// over max_pixels (job->too_large). No C++ object with a destructor lives in
// this frame: longjmp would skip it.
bool decode_jpeg(const std::uint8_t* bytes, std::size_t size, int channels, int short_side,
                 const PixelBuffer& out, std::uint64_t max_pixels, JpegJob* job,
                 DecodedImage* result) {
  job->info.err = jpeg_std_error(&job->errors);
  job->errors.error_exit = jpeg_fail;
  job->errors.emit_message = jpeg_warning;
  job->progress.progress_monitor = jpeg_progress;
  job->info.client_data = job;
  if (setjmp(job->jump) != 0) {
    jpeg_destroy_decompress(&job->info);
    return false;
  }
  jpeg_create_decompress(&job->info);
  job->info.progress = &job->progress;
  jpeg_mem_src(&job->info, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&job->info, TRUE);
  result->file_height = job->info.image_height;
  result->file_width = job->info.image_width;
  if (std::uint64_t{job->info.image_height} * job->info.image_width > max_pixels) {
    job->too_large = true;
    jpeg_destroy_decompress(&job->info);
    return false;
  }
  job->info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  if (short_side > 0) {
    // The smallest scale m/8 whose shorter side is still >= short_side.
    const unsigned shorter = std::min(job->info.image_width, job->info.image_height);
    unsigned m = 8;
    while (m > 1 && (shorter * (m - 1) + 7) / 8 >= static_cast<unsigned>(short_side)) --m;
    job->info.scale_num = m;
    job->info.scale_denom = 8;
  }
  jpeg_start_decompress(&job->info);
  result->width = static_cast<int>(job->info.output_width);
  result->height = static_cast<int>(job->info.output_height);
  result->channels = job->info.output_components;
  result->scale = static_cast<double>(job->info.scale_num) / job->info.scale_denom;
  const std::size_t row = static_cast<std::size_t>(result->width) * result->channels;
  std::uint8_t* pixels = out(result->height, result->width, result->channels);
  while (job->info.output_scanline < job->info.output_height) {
    JSAMPROW line = pixels + row * job->info.output_scanline;
    jpeg_read_scanlines(&job->info, &line, 1);
  }
  jpeg_finish_decompress(&job->info);
  jpeg_destroy_decompress(&job->info);
  return true;
}

}  // namespace

ImageFormat sniff_image(const std::uint8_t* b, std::size_t n) {
  static const std::uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return ImageFormat::jpeg;
  if (n >= 8 && std::memcmp(b, png, 8) == 0) return ImageFormat::png;
  return ImageFormat::other;
}

DecodedImage decode_image(const std::uint8_t* bytes, std::size_t size, int channels,
                          int short_side, const PixelBuffer& out, const std::string& path,
                          std::uint64_t max_pixels) {
  DecodedImage result;
  switch (sniff_image(bytes, size)) {
    case ImageFormat::jpeg: {
      auto job = std::make_unique<JpegJob>();
      if (decode_jpeg(bytes, size, channels, short_side, out, max_pixels, job.get(), &result))
        return result;
      if (job->too_large)
        throw SampleError("'" + path + "' is a JPEG of " +
                          pixels_text(static_cast<std::uint64_t>(result.file_height),
                                      static_cast<std::uint64_t>(result.file_width), max_pixels));
      throw SampleError("'" + path + "' is not a readable JPEG: " + job->message);
    }
    case ImageFormat::png: {
      png_image image{};
      image.version = PNG_IMAGE_VERSION;
      if (png_image_begin_read_from_memory(&image, bytes, size) == 0)
        throw SampleError("'" + path + "' is not a readable PNG: " + image.message);
      result.file_height = image.height;
      result.file_width = image.width;
      if (std::uint64_t{image.height} * image.width > max_pixels) {
        png_image_free(&image);
        throw SampleError("'" + path + "' is a PNG of " +
                          pixels_text(image.height, image.width, max_pixels));
      }
      // Always RGB: libpng's own grayscale conversion works in linear light,
      // tens of levels from the luma PIL and torchvision compute.
      image.format = PNG_FORMAT_RGB;
      result.height = static_cast<int>(image.height);
      result.width = static_cast<int>(image.width);
      result.channels = 3;
      std::uint8_t* pixels = out(result.height, result.width, 3);
      if (png_image_finish_read(&image, nullptr, pixels, 0, nullptr) == 0) {
        const std::string message = image.message;
        png_image_free(&image);
        throw SampleError("'" + path + "' is not a readable PNG: " + message);
      }
      return result;
    }
    case ImageFormat::other: break;
  }
  throw SampleError("'" + path + "' is neither a JPEG nor a PNG");
}

}  // namespace runner_loaders
