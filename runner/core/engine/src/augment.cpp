// The augmentations of [data] on whole batches (augment.hpp).
#include "runner/engine/augment.hpp"

#include <ATen/Dispatch.h>
#include <torch/nn/functional/upsampling.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "runner/common/strings.hpp"

namespace runner {
namespace {

// splitmix64: a good generator from any seed, cheap enough per sample.
std::uint64_t mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct Size2 {
  std::int64_t height = 0, width = 0;
};

Size2 square_or_pair(const std::vector<std::int64_t>& v) {
  return v.size() == 1 ? Size2{v[0], v[0]} : Size2{v[0], v[1]};
}

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string values_text(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " value" : " values");
}

std::string size_text(Size2 s) {
  return "[" + std::to_string(s.height) + ", " + std::to_string(s.width) + "]";
}

// torchvision's Resize: [n] sets the shorter side, the longer keeps the aspect ratio.
Size2 resized(Size2 in, const std::vector<std::int64_t>& resize) {
  if (resize.size() == 2) return {resize[0], resize[1]};
  const std::int64_t n = resize[0];
  if (in.height <= in.width)
    return {n, static_cast<std::int64_t>(static_cast<double>(n) * static_cast<double>(in.width) /
                                         static_cast<double>(in.height))};
  return {static_cast<std::int64_t>(static_cast<double>(n) * static_cast<double>(in.height) /
                                    static_cast<double>(in.width)),
          n};
}

// torchvision's center crop offset: Python's round(), halves to even.
std::int64_t center_offset(std::int64_t outer, std::int64_t inner) {
  return static_cast<std::int64_t>(std::nearbyint(static_cast<double>(outer - inner) / 2.0));
}

// Where one sample's window starts in its padded image, and whether it is mirrored.
struct Window {
  std::int64_t top = 0, left = 0;
  bool flip = false;
};

// Copies window `w` of size `out` from `in` ([C, H, W], zero-padded by `pad`
// on every side) into `dst` ([C, out.height, out.width]), mirrored when w.flip.
template <typename T>
void copy_window(const T* in, std::int64_t channels, Size2 size, std::int64_t pad, Window w,
                 Size2 out, T* dst) {
  // Columns of the window that fall inside the image (the rest is padding).
  const std::int64_t first = std::max<std::int64_t>(0, pad - w.left);
  const std::int64_t last = std::min<std::int64_t>(out.width, size.width + pad - w.left);
  for (std::int64_t c = 0; c < channels; ++c) {
    for (std::int64_t y = 0; y < out.height; ++y) {
      T* row = dst + (c * out.height + y) * out.width;
      const std::int64_t source_y = w.top + y - pad;
      if (source_y < 0 || source_y >= size.height || first >= last) {
        std::fill(row, row + out.width, T(0));
        continue;
      }
      const T* source = in + (c * size.height + source_y) * size.width + (w.left - pad);
      if (!w.flip) {
        std::fill(row, row + first, T(0));
        std::memcpy(row + first, source + first, static_cast<std::size_t>(last - first) * sizeof(T));
        std::fill(row + last, row + out.width, T(0));
      } else {
        // Output column x shows window column (width - 1 - x).
        for (std::int64_t x = 0; x < out.width; ++x) {
          const std::int64_t from = out.width - 1 - x;
          row[x] = (from >= first && from < last) ? source[from] : T(0);
        }
      }
    }
  }
}

}  // namespace

std::uint64_t sample_seed(std::uint64_t run_seed, std::int64_t epoch, std::int64_t sample) {
  std::uint64_t state = run_seed;
  std::uint64_t h = mix(state);
  state = h ^ static_cast<std::uint64_t>(epoch);
  h = mix(state);
  state = h ^ static_cast<std::uint64_t>(sample);
  return mix(state);
}

Augmenter::Augmenter(AugmentSettings settings, std::uint64_t seed, bool train)
    : settings_(std::move(settings)), seed_(seed), train_(train) {}

std::vector<std::int64_t> Augmenter::output_shape(const std::vector<std::int64_t>& input) const {
  const AugmentSettings& a = settings_;
  std::vector<std::int64_t> shape = input;
  const char* image_key = !a.resize.empty()        ? "resize"
                          : !a.center_crop.empty() ? "center_crop"
                          : !a.random_crop.empty() ? "random_crop"
                          : a.hflip > 0            ? "hflip"
                                                   : nullptr;
  if (image_key != nullptr && shape.size() != 3)
    throw AugmentError(image_key,
                       std::string("data.") + image_key +
                           " needs image samples [channels, height, width]; the loader's "
                           "samples are " + shape_text(input),
                       "remove it, or use a loader of images");
  if (shape.size() == 3) {
    Size2 size{shape[1], shape[2]};
    if (!a.resize.empty()) size = resized(size, a.resize);
    if (!a.center_crop.empty()) {
      const Size2 crop = square_or_pair(a.center_crop);
      if (crop.height > size.height || crop.width > size.width)
        throw AugmentError("center_crop", "data.center_crop " + size_text(crop) +
                                              " is larger than the samples " + size_text(size),
                           "crop at most the samples' size, or resize first");
      size = crop;
    }
    if (!a.random_crop.empty()) {
      const Size2 crop = square_or_pair(a.random_crop);
      const Size2 padded{size.height + 2 * a.crop_padding, size.width + 2 * a.crop_padding};
      if (crop.height > padded.height || crop.width > padded.width)
        throw AugmentError("random_crop", "data.random_crop " + size_text(crop) +
                                              " is larger than the padded samples " +
                                              size_text(padded),
                           "crop at most the samples' size plus 2 x crop_padding");
      size = crop;
    }
    shape[1] = size.height;
    shape[2] = size.width;
  }
  if (!a.normalize_mean.empty() || !a.normalize_std.empty()) {
    const char* missing = a.normalize_mean.empty() ? "normalize_mean" : "normalize_std";
    if (a.normalize_mean.empty() || a.normalize_std.empty())
      throw AugmentError(missing, std::string("data.normalize_mean and data.normalize_std go "
                                              "together; ") + missing + " is missing",
                         "set both, one value per channel");
    if (a.normalize_mean.size() != a.normalize_std.size())
      throw AugmentError("normalize_std", "data.normalize_std has " +
                                              values_text(a.normalize_std.size()) +
                                              " but normalize_mean has " +
                                              values_text(a.normalize_mean.size()),
                         "give one mean and one standard deviation per channel");
    const std::int64_t channels = shape.empty() ? 1 : shape[0];
    const auto given = static_cast<std::int64_t>(a.normalize_mean.size());
    if (given != 1 && given != channels)
      throw AugmentError("normalize_mean", "data.normalize_mean has " +
                                               values_text(static_cast<std::size_t>(given)) +
                                               " but the samples have " +
                                               std::to_string(channels) + " channels (shape " +
                                               shape_text(input) + ")",
                         "give one value per channel, or one for all");
    for (double s : a.normalize_std)
      if (!(s > 0))
        throw AugmentError("normalize_std",
                           "data.normalize_std must be > 0, found " + number_text(s),
                           "give each channel's standard deviation");
  }
  return shape;
}

torch::Tensor Augmenter::apply(const torch::Tensor& inputs, const std::vector<std::int64_t>& ids,
                               std::int64_t epoch) const {
  const AugmentSettings& a = settings_;
  torch::Tensor x = inputs;
  if (!a.resize.empty()) {
    const Size2 to = resized({x.size(2), x.size(3)}, a.resize);
    namespace F = torch::nn::functional;
    // Bilinear with antialiasing, as torchvision's Resize on tensors (uint8 directly).
    x = F::interpolate(x, F::InterpolateFuncOptions()
                              .size(std::vector<std::int64_t>{to.height, to.width})
                              .mode(torch::kBilinear)
                              .align_corners(false)
                              .antialias(true));
  }
  if (!a.center_crop.empty()) {
    const Size2 crop = square_or_pair(a.center_crop);
    x = x.narrow(2, center_offset(x.size(2), crop.height), crop.height)
            .narrow(3, center_offset(x.size(3), crop.width), crop.width);
  }
  const bool flips = train_ && a.hflip > 0;
  if (!a.random_crop.empty() || flips) {
    const Size2 size{x.size(2), x.size(3)};
    const std::int64_t pad = a.random_crop.empty() ? 0 : a.crop_padding;
    const Size2 out = a.random_crop.empty() ? size : square_or_pair(a.random_crop);
    const std::int64_t spare_y = size.height + 2 * pad - out.height;
    const std::int64_t spare_x = size.width + 2 * pad - out.width;
    const torch::Tensor source = x.contiguous();
    torch::Tensor result = torch::empty({x.size(0), x.size(1), out.height, out.width}, x.options());
    const std::int64_t channels = x.size(1);
    const std::int64_t in_stride = channels * size.height * size.width;
    const std::int64_t out_stride = channels * out.height * out.width;
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "augment_window", [&] {
      const scalar_t* in = source.data_ptr<scalar_t>();
      scalar_t* dst = result.data_ptr<scalar_t>();
      for (std::int64_t b = 0; b < x.size(0); ++b) {
        Window w{center_offset(spare_y + out.height, out.height),
                 center_offset(spare_x + out.width, out.width), false};
        if (train_) {
          std::uint64_t state = sample_seed(seed_, epoch, ids[static_cast<std::size_t>(b)]);
          if (!a.random_crop.empty()) {
            w.top = static_cast<std::int64_t>(mix(state) % static_cast<std::uint64_t>(spare_y + 1));
            w.left = static_cast<std::int64_t>(mix(state) % static_cast<std::uint64_t>(spare_x + 1));
          }
          // 53 random bits: a uniform double in [0, 1).
          const double u = static_cast<double>(mix(state) >> 11) * 0x1.0p-53;
          w.flip = flips && u < a.hflip;
        }
        copy_window(in + b * in_stride, channels, size, pad, w, out, dst + b * out_stride);
      }
    });
    x = result;
  }
  if (x.scalar_type() == torch::kUInt8) x = x.to(torch::kFloat32).div_(255);
  if (!a.normalize_mean.empty()) {
    std::vector<std::int64_t> view(static_cast<std::size_t>(x.dim() - 1), 1);
    view[0] = -1;
    const auto options = torch::TensorOptions().dtype(x.scalar_type());
    const torch::Tensor mean =
        torch::tensor(a.normalize_mean, torch::kFloat64).to(options.dtype()).view(view);
    const torch::Tensor std =
        torch::tensor(a.normalize_std, torch::kFloat64).to(options.dtype()).view(view);
    x = x.sub(mean).div_(std);
  }
  return x;
}

}  // namespace runner
