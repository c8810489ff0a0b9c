// Loader `image_folder`: torchvision's ImageFolder layout, path/<class>/<file>,
// classes in sorted order, JPEG decoded by libjpeg-turbo and PNG by libpng.
// Samples are uint8 [3, H, W] RGB (or [1, H, W] with channels = 1). With
// short_side the shorter side is resized to it (bilinear, antialiased, as
// torchvision's Resize(int) on tensors), a JPEG first decoded at the
// smallest DCT scale (1/8 steps) that stays at least that size, which skips
// most of the decoding work; crop then takes the center.
#include <ATen/ops/_upsample_bilinear2d_aa.h>

#include <runner/sdk.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../common/formats/image_decode.hpp"

namespace {

namespace fs = std::filesystem;

struct ImageFolderOptions {
  std::string path, eval_path;
  std::int64_t short_side = 0;
  std::vector<std::int64_t> crop;
  std::int64_t channels = 3;
};

using runner_loaders::ImageFormat;
using runner_loaders::sniff_image;

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw runner::SampleError("cannot read '" + path + "'");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(in.tellg()));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw runner::SampleError("cannot read '" + path + "'");
  return bytes;
}

// ITU-R BT.601 luma of uint8 RGB [3, H, W] as uint8 [1, H, W], in 16-bit
// fixed point (0.299, 0.587, 0.114 times 65536, rounded to nearest).
torch::Tensor luma(const torch::Tensor& rgb) {
  const torch::Tensor c = rgb.to(torch::kInt);
  return ((c[0] * 19595 + c[1] * 38470 + c[2] * 7471 + 32768) / 65536).to(torch::kUInt8).unsqueeze(0);
}

// A decoded image: uint8 [C, H, W], decoded at `scale` of the file's
// height x width (JPEG's DCT scaling; 1 otherwise).
struct Decoded {
  torch::Tensor image;
  std::int64_t height = 0, width = 0;
  double scale = 1;
};

Decoded decode(const std::string& path, int channels, int short_side) {
  const std::vector<std::uint8_t> data = read_file(path);
  torch::Tensor hwc;  // decoded into directly
  const runner_loaders::DecodedImage image = runner_loaders::decode_image(
      data.data(), data.size(), channels, short_side,
      [&](int height, int width, int components) {
        hwc = torch::empty({height, width, components}, torch::kUInt8);
        return hwc.data_ptr<std::uint8_t>();
      },
      path);
  torch::Tensor chw = hwc.permute({2, 0, 1});  // a view: copied once, into the batch
  // A PNG is always decoded to RGB (see image_decode.cpp).
  if (channels == 1 && image.channels == 3) chw = luma(chw);
  return {chw, image.file_height, image.file_width, image.scale};
}

class ImageFolder final : public runner::Loader {
 public:
  ImageFolder(const ImageFolderOptions& o, const runner::LoaderContext& context)
      : short_side_(o.short_side), crop_(o.crop), channels_(static_cast<int>(o.channels)) {
    const bool train = context.split == runner::Split::train;
    if (!train && o.eval_path.empty())
      throw runner::DataError("no eval split: set eval_path to a folder of held-out images "
                              "with the same class folders");
    const std::string root = train ? o.path : o.eval_path;
    const std::string option = train ? "path" : "eval_path";
    std::error_code error;
    if (!fs::is_directory(root, error))
      throw runner::OptionError(option, "'" + root + "' is not a folder");
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory()) classes_.push_back(entry.path().filename().string());
    std::sort(classes_.begin(), classes_.end());
    if (classes_.empty())
      throw runner::DataError("'" + root + "' has no class folders (it needs " + root +
                              "/<class>/<image>)");
    if (!train) check_same_classes(o.path, root);
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(fs::path(root) / classes_[c]))
        if (entry.is_regular_file()) files.push_back(entry.path().string());
      std::sort(files.begin(), files.end());
      for (const std::string& file : files) {
        if (!looks_like_an_image(file)) {
          if (context.skip_bad_samples) {
            ++skipped_;
            continue;
          }
          throw runner::DataError("'" + file + "' is neither a JPEG nor a PNG (by its first "
                                  "bytes); remove it, or set data.on_error = \"skip\"");
        }
        files_.push_back(file);
        labels_.push_back(static_cast<std::int64_t>(c));
      }
    }
    if (files_.empty()) throw runner::DataError("'" + root + "' has no JPEG or PNG images");
    // The sample shape: that of the first image (all must agree unless resized and cropped).
    shape_ = {channels_, 0, 0};
    const torch::Tensor first = load(0);
    shape_ = {first.size(0), first.size(1), first.size(2)};
  }

  runner::DataSpec spec() const override {
    return {shape_, static_cast<std::int64_t>(classes_.size())};
  }
  std::int64_t size() const override { return static_cast<std::int64_t>(files_.size()); }
  std::int64_t skipped() const override { return skipped_; }

  runner::Example get(std::int64_t index) override {
    return {sample(index).contiguous(), torch::tensor(labels_[static_cast<std::size_t>(index)], torch::kLong)};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    const auto n = static_cast<std::int64_t>(indices.size());
    runner::Batch b{torch::empty({n, shape_[0], shape_[1], shape_[2]}, torch::kUInt8),
                    torch::empty({n}, torch::kLong), n};
    auto* targets = b.targets.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t index = indices[static_cast<std::size_t>(i)];
      b.inputs[i].copy_(sample(index));  // the decoder's HWC pixels, transposed once
      targets[i] = labels_[static_cast<std::size_t>(index)];
    }
    return b;
  }

 private:
  // Sample `index` as a [C, H, W] view (not necessarily contiguous), checked
  // to have the data set's shape.
  torch::Tensor sample(std::int64_t index) const {
    if (index < 0 || index >= size())
      throw runner::DataError("sample " + std::to_string(index) + " is outside the " +
                              std::to_string(size()) + " images");
    torch::Tensor image = load(index);
    if (image.sizes() != torch::IntArrayRef(shape_))
      throw runner::DataError(
          "'" + files_[static_cast<std::size_t>(index)] + "' is " + std::to_string(image.size(2)) +
          "x" + std::to_string(image.size(1)) + " but '" + files_.front() + "' is " +
          std::to_string(shape_[2]) + "x" + std::to_string(shape_[1]) +
          ": set short_side and crop so every image has one size");
    return image;
  }

  static bool looks_like_an_image(const std::string& file) {
    std::uint8_t head[8] = {};
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(head), sizeof head);
    return sniff_image(head, static_cast<std::size_t>(in.gcount())) != ImageFormat::other;
  }

  void check_same_classes(const std::string& train_root, const std::string& root) const {
    std::vector<std::string> train;
    std::error_code error;
    if (fs::is_directory(train_root, error))
      for (const auto& entry : fs::directory_iterator(train_root))
        if (entry.is_directory()) train.push_back(entry.path().filename().string());
    std::sort(train.begin(), train.end());
    if (train != classes_)
      throw runner::DataError("'" + root + "' has " + std::to_string(classes_.size()) +
                              " class folders that are not those of '" + train_root + "' (" +
                              std::to_string(train.size()) + "): the eval split needs the same "
                              "classes, in the same order");
  }

  // Decoded, resized and cropped as the options say: a [C, H, W] view of
  // the decoder's [H, W, C] pixels (copied once, by the caller).
  torch::Tensor load(std::int64_t index) const {
    const Decoded d =
        decode(files_[static_cast<std::size_t>(index)], channels_, static_cast<int>(short_side_));
    torch::Tensor image = d.image;
    if (short_side_ > 0) {
      // The size torchvision's Resize(short_side) gives the full image...
      const std::int64_t h = d.height, w = d.width;
      const std::vector<std::int64_t> size =
          h <= w ? std::vector<std::int64_t>{short_side_, short_side_ * w / h}
                 : std::vector<std::int64_t>{short_side_ * h / w, short_side_};
      if (size[0] != image.size(1) || size[1] != image.size(2)) {
        // ...and its sampling grid: a DCT-scaled decode spans h * scale rows,
        // its last row partly padding (libjpeg rounds the size up), so the
        // scales are those of the file's extent, not of the decoded size.
        const double sh = static_cast<double>(size[0]) / (static_cast<double>(h) * d.scale);
        const double sw = static_cast<double>(size[1]) / (static_cast<double>(w) * d.scale);
        image = at::_upsample_bilinear2d_aa(image.unsqueeze(0), size, /*align_corners=*/false, sh, sw)
                    .squeeze(0);
      }
    }
    if (!crop_.empty()) {
      const std::int64_t ch = crop_[0], cw = crop_.size() > 1 ? crop_[1] : crop_[0];
      if (ch > image.size(1) || cw > image.size(2))
        throw runner::DataError("'" + files_[static_cast<std::size_t>(index)] + "' is " +
                                std::to_string(image.size(2)) + "x" + std::to_string(image.size(1)) +
                                " after resizing, smaller than crop " + std::to_string(cw) + "x" +
                                std::to_string(ch) + "; raise short_side");
      image = image.narrow(1, (image.size(1) - ch) / 2, ch).narrow(2, (image.size(2) - cw) / 2, cw);
    }
    return image;
  }

  std::int64_t short_side_;
  std::vector<std::int64_t> crop_;
  int channels_;
  std::vector<std::string> classes_, files_;
  std::vector<std::int64_t> labels_;
  std::vector<std::int64_t> shape_;
  std::int64_t skipped_ = 0;
};

void register_plugins(runner::Registrar& registrar) {
  using O = ImageFolderOptions;
  runner::OptionBinder<O> options;
  options.field("path", &O::path, "root folder: <class>/<image> (JPEG, PNG)").path().required();
  options.field("eval_path", &O::eval_path, "root of the held-out images (same classes)").path();
  options.field("short_side", &O::short_side,
                "resize on decode so the shorter side is this many pixels; 0: keep the size")
      .range(0, 1 << 14);
  options.field("crop", &O::crop, "center crop after resizing: [n] or [height, width]")
      .range(1, 1 << 14)
      .items(0, 2);
  options.field("channels", &O::channels, "3: RGB, 1: grayscale").range(1, 3);
  registrar.add_loader("image_folder",
                       "class-per-folder JPEG and PNG images (libjpeg-turbo, libpng), resized "
                       "and cropped on decode",
                       options, [](const O& o, const runner::LoaderContext& ctx) {
                         if (o.channels == 2)
                           throw runner::OptionError("channels", "must be 1 or 3, found 2");
                         return std::make_unique<ImageFolder>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
