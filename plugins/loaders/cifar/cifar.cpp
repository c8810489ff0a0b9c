// Loader `cifar`: CIFAR-10 and CIFAR-100 in their binary distribution
// (cifar-10-batches-bin, cifar-100-binary), memory-mapped. A record is the
// label byte (CIFAR-100: coarse, then fine) and 3072 pixel bytes, the red,
// green and blue planes of a 32x32 image row by row. Samples are uint8
// [3, 32, 32]; a batch is one copy per record out of the page cache.
#include <runner/sdk.hpp>

#include <memory>
#include <string>
#include <vector>

#include "../common/mapped_file.hpp"
#include "../common/records.hpp"
#include "../common/formats/record_files.hpp"

namespace {

constexpr std::int64_t kPixels = runner_loaders::kCifarPixels;

struct CifarOptions {
  std::string path;
  std::string variant = "cifar10";
  std::string labels = "fine";
  std::vector<std::string> files;       // train split; empty: the variant's
  std::vector<std::string> eval_files;  // eval split; empty: the variant's
};

// One file's records, mapped.
struct Part {
  runner_loaders::MappedFile file;
  std::int64_t records = 0;
  std::int64_t first = 0;  // index of its first record in the data set
};

class Cifar final : public runner::Loader {
 public:
  Cifar(const CifarOptions& o, const runner::LoaderContext& context)
      : label_bytes_(o.variant == "cifar100" ? 2 : 1),
        label_offset_(o.variant == "cifar100" && o.labels == "fine" ? 1 : 0),
        classes_(o.variant == "cifar10" ? 10 : o.labels == "fine" ? 100 : 20) {
    if (o.variant == "cifar10" && o.labels == "coarse")
      throw runner::OptionError("labels", "CIFAR-10 has one label per image; \"coarse\" is "
                                          "CIFAR-100's (variant = \"cifar100\")");
    for (const std::string& name : file_names(o, context.split)) {
      Part part{runner_loaders::MappedFile(o.path + "/" + name, option_of(o, context.split)), 0,
                size_};
      part.records = runner_loaders::check_cifar_file(part.file.data(), part.file.size(),
                                                      label_bytes_, label_offset_, classes_,
                                                      part.file.path());
      part.file.advise_random();
      size_ += part.records;
      parts_.push_back(std::move(part));
    }
  }

  runner::DataSpec spec() const override { return {{3, 32, 32}, classes_}; }
  std::int64_t size() const override { return size_; }

  runner::Example get(std::int64_t index) override {
    runner::Batch b = get_batch({index});
    return {b.inputs[0], b.targets[0]};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    return runner_loaders::gather(
        indices, size_, {3, 32, 32}, torch::kUInt8, kPixels,
        [&](std::int64_t i) { return record(i) + label_bytes_; },
        [&](std::int64_t i) { return static_cast<std::int64_t>(record(i)[label_offset_]); });
  }

 private:
  // The option that names the split's files (for a file that cannot be opened).
  static std::string option_of(const CifarOptions& o, runner::Split split) {
    const bool train = split == runner::Split::train;
    if (train ? o.files.empty() : o.eval_files.empty()) return "path";
    return train ? "files" : "eval_files";
  }

  static std::vector<std::string> file_names(const CifarOptions& o, runner::Split split) {
    const bool train = split == runner::Split::train;
    if (train && !o.files.empty()) return o.files;
    if (!train && !o.eval_files.empty()) return o.eval_files;
    if (o.variant == "cifar100") return {train ? "train.bin" : "test.bin"};
    if (!train) return {"test_batch.bin"};
    return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
            "data_batch_5.bin"};
  }

  // The first byte of record `index` (checked by gather).
  const std::uint8_t* record(std::int64_t index) const {
    std::size_t p = parts_.size() - 1;
    while (parts_[p].first > index) --p;
    return parts_[p].file.data() + (index - parts_[p].first) * (label_bytes_ + kPixels);
  }

  std::int64_t label_bytes_, label_offset_, classes_;
  std::int64_t size_ = 0;
  std::vector<Part> parts_;
};

void register_plugins(runner::Registrar& registrar) {
  using O = CifarOptions;
  runner::OptionBinder<O> options;
  options.field("path", &O::path, "folder of the binary files (cifar-10-batches-bin, cifar-100-binary)")
      .path()
      .required();
  options.field("variant", &O::variant, "cifar10 (10 classes) or cifar100")
      .one_of({"cifar10", "cifar100"});
  options.field("labels", &O::labels, "CIFAR-100: fine (100 classes) or coarse (20)")
      .one_of({"fine", "coarse"});
  options.field("files", &O::files,
                "names of the training files in path, instead of the variant's");
  options.field("eval_files", &O::eval_files,
                "names of the held-out files in path, instead of the variant's");
  registrar.add_loader("cifar",
                       "CIFAR-10/100 binary files, memory-mapped; train: the data batches, eval: "
                       "the test batch",
                       options, [](const O& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<Cifar>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
