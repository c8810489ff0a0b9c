// Loader `mnist`: the IDX files of MNIST and Fashion-MNIST (uncompressed),
// memory-mapped. An IDX file is two zero bytes, a type code (0x08: unsigned
// bytes, the only one these data sets use), the number of dimensions, each
// dimension as a big-endian uint32, then the data. Images are [n, rows,
// cols], labels [n]. Samples are uint8 [1, rows, cols].
#include <runner/sdk.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "../common/mapped_file.hpp"
#include "../common/records.hpp"
#include "../common/formats/idx_header.hpp"

namespace {

struct MnistOptions {
  std::string path;
  std::int64_t classes = 10;
};

// A mapped IDX file of unsigned bytes with `dims` dimensions, checked.
struct Idx {
  runner_loaders::MappedFile file;
  std::vector<std::int64_t> shape;
  std::size_t header = 0;
  [[nodiscard]] const std::uint8_t* data() const { return file.data() + header; }
};

Idx open_idx(const std::string& folder, const std::string& name, std::size_t dims) {
  const std::string path = folder + "/" + name;
  if (!std::filesystem::exists(path) && std::filesystem::exists(path + ".gz"))
    throw runner::OptionError("path", "'" + path + "' is missing, but '" + name +
                                          ".gz' is there: decompress it with gunzip");
  Idx idx{runner_loaders::MappedFile(path, "path"), {}, 0};
  runner_loaders::IdxHeader header =
      runner_loaders::parse_idx_header(idx.file.data(), idx.file.size(), dims, path);
  idx.shape = std::move(header.shape);
  idx.header = header.data;
  idx.file.advise_random();
  return idx;
}

class Mnist final : public runner::Loader {
 public:
  Mnist(const MnistOptions& o, const runner::LoaderContext& context)
      : images_(open_idx(o.path, prefix(context) + "-images-idx3-ubyte", 3)),
        labels_(open_idx(o.path, prefix(context) + "-labels-idx1-ubyte", 1)),
        classes_(o.classes) {
    if (images_.shape[0] != labels_.shape[0])
      throw runner::DataError("'" + images_.file.path() + "' has " +
                              std::to_string(images_.shape[0]) + " images but '" +
                              labels_.file.path() + "' has " + std::to_string(labels_.shape[0]) +
                              " labels");
    const std::uint8_t* labels = labels_.data();
    runner_loaders::check_labels(labels_.file.path(), labels_.shape[0], classes_,
                                  static_cast<std::int64_t>(labels_.header), 1,
                                  [&](std::int64_t r) { return labels[r]; });
  }

  runner::DataSpec spec() const override {
    return {{1, images_.shape[1], images_.shape[2]}, classes_};
  }
  std::int64_t size() const override { return images_.shape[0]; }

  runner::Example get(std::int64_t index) override {
    runner::Batch b = get_batch({index});
    return {b.inputs[0], b.targets[0]};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    const auto pixels = static_cast<std::size_t>(images_.shape[1] * images_.shape[2]);
    return runner_loaders::gather(
        indices, size(), {1, images_.shape[1], images_.shape[2]}, torch::kUInt8, pixels,
        [&](std::int64_t i) { return images_.data() + static_cast<std::size_t>(i) * pixels; },
        [&](std::int64_t i) { return static_cast<std::int64_t>(labels_.data()[i]); });
  }

 private:
  static std::string prefix(const runner::LoaderContext& context) {
    return context.split == runner::Split::train ? "train" : "t10k";
  }

  Idx images_, labels_;
  std::int64_t classes_;
};

void register_plugins(runner::Registrar& registrar) {
  using O = MnistOptions;
  runner::OptionBinder<O> options;
  options.field("path", &O::path,
                "folder of the uncompressed IDX files (train-images-idx3-ubyte, ...)")
      .path()
      .required();
  options.field("classes", &O::classes, "number of classes; every label must be below it")
      .range(2, 256);
  registrar.add_loader("mnist",
                       "MNIST / Fashion-MNIST IDX files, memory-mapped; train: train-*, eval: "
                       "t10k-*",
                       options, [](const O& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<Mnist>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
