// Loader `npy`: inputs and labels from NumPy .npy files (as np.save writes
// them), memory-mapped. Row i of the inputs is sample i, element i of the
// labels its target. Inputs keep uint8 (images: the pipeline scales them to
// [0, 1]) and integer types (as int64, e.g. token ids); floating inputs
// become float32. Integer labels become int64 class indices, floating
// labels float32 regression targets.
#include <runner/sdk.hpp>

#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../common/mapped_file.hpp"
#include "../common/records.hpp"
#include "../common/formats/npy_header.hpp"

namespace {

struct NpyOptions {
  std::string inputs, labels, eval_inputs, eval_labels;
  std::int64_t classes = 0;
};

// The torch dtype of each .npy dtype the header parser accepts.
torch::ScalarType scalar_type(const std::string& descr) {
  static const std::map<std::string, torch::ScalarType> all{
      {"|u1", torch::kUInt8}, {"|i1", torch::kInt8},     {"<i2", torch::kInt16},
      {"<i4", torch::kInt32}, {"<i8", torch::kInt64},    {"<f4", torch::kFloat32},
      {"<f8", torch::kFloat64}, {"|b1", torch::kBool}};
  return all.at(descr);
}

struct Dtype {
  torch::ScalarType type;
  std::size_t size;
};

// A mapped .npy file: its dtype, shape and where the data starts.
struct Array {
  runner_loaders::MappedFile file;
  Dtype dtype{};
  std::vector<std::int64_t> shape;
  std::size_t data = 0;  // byte offset of the data
  [[nodiscard]] std::size_t row_bytes() const {
    std::size_t n = dtype.size;
    for (std::size_t d = 1; d < shape.size(); ++d) n *= static_cast<std::size_t>(shape[d]);
    return n;
  }
};

Array open_npy(const std::string& path, const std::string& option) {
  Array a{runner_loaders::MappedFile(path, option), {}, {}, 0};
  runner_loaders::NpyHeader header = runner_loaders::parse_npy_header(a.file.data(), a.file.size(), path);
  a.dtype = Dtype{scalar_type(header.descr), header.item_size};
  a.shape = std::move(header.shape);
  a.data = header.data;
  a.file.advise_random();
  return a;
}

bool is_integer(torch::ScalarType t) {
  return t != torch::kFloat32 && t != torch::kFloat64 && t != torch::kBool;
}

class Npy final : public runner::Loader {
 public:
  Npy(const NpyOptions& o, const runner::LoaderContext& context) : classes_(o.classes) {
    const bool train = context.split == runner::Split::train;
    if (!train && o.eval_inputs.empty())
      throw runner::DataError("no eval split: set eval_inputs (and eval_labels) to hold-out files");
    inputs_ = std::make_unique<Array>(open_npy(train ? o.inputs : o.eval_inputs,
                                               train ? "inputs" : "eval_inputs"));
    const std::string& labels = train ? o.labels : o.eval_labels;
    if (labels.empty()) return;
    labels_ = std::make_unique<Array>(open_npy(labels, train ? "labels" : "eval_labels"));
    if (labels_->shape.size() != 1 || labels_->shape[0] != inputs_->shape[0])
      throw runner::DataError("'" + labels + "' has shape " + shape_of(*labels_) + " but '" +
                              inputs_->file.path() + "' has " + std::to_string(inputs_->shape[0]) +
                              " samples: labels need shape (" + std::to_string(inputs_->shape[0]) +
                              ",)");
    if (classes_ > 0) {
      if (!is_integer(labels_->dtype.type))
        throw runner::DataError("'" + labels + "': classes = " + std::to_string(classes_) +
                                " needs integer labels");
      const torch::Tensor all = column(*labels_).to(torch::kLong);
      const std::int64_t* v = all.data_ptr<std::int64_t>();
      runner_loaders::check_labels(labels, labels_->shape[0], classes_,
                                    static_cast<std::int64_t>(labels_->data),
                                    static_cast<std::int64_t>(labels_->dtype.size),
                                    [&](std::int64_t r) { return v[r]; });
    }
  }

  runner::DataSpec spec() const override {
    return {{inputs_->shape.begin() + 1, inputs_->shape.end()}, classes_};
  }
  std::int64_t size() const override { return inputs_->shape[0]; }

  runner::Example get(std::int64_t index) override {
    runner::Batch b = get_batch({index});
    return {b.inputs[0], b.targets.defined() ? b.targets[0] : torch::Tensor()};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    runner::Batch b;
    b.inputs = rows(*inputs_, indices);
    const torch::ScalarType t = inputs_->dtype.type;
    if (t == torch::kFloat64) b.inputs = b.inputs.to(torch::kFloat32);
    else if (t != torch::kUInt8 && t != torch::kFloat32) b.inputs = b.inputs.to(torch::kLong);
    if (labels_) {
      b.targets = rows(*labels_, indices);
      b.targets = b.targets.to(is_integer(labels_->dtype.type) ? torch::kLong : torch::kFloat32);
    }
    b.size = static_cast<std::int64_t>(indices.size());
    return b;
  }

 private:
  static std::string shape_of(const Array& a) {
    std::string s = "(";
    for (std::size_t d = 0; d < a.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(a.shape[d]);
    return s + (a.shape.size() == 1 ? ",)" : ")");
  }
  // A view of a whole 1-D array (valid while the file is mapped).
  static torch::Tensor column(const Array& a) {
    return torch::from_blob(const_cast<std::uint8_t*>(a.file.data() + a.data), {a.shape[0]},
                            torch::TensorOptions().dtype(a.dtype.type));
  }
  static torch::Tensor rows(const Array& a, const std::vector<std::int64_t>& indices) {
    const std::size_t bytes = a.row_bytes();
    runner::Batch b = runner_loaders::gather(
        indices, a.shape[0], {a.shape.begin() + 1, a.shape.end()}, a.dtype.type, bytes,
        [&](std::int64_t i) { return a.file.data() + a.data + static_cast<std::size_t>(i) * bytes; },
        [](std::int64_t) { return std::int64_t{0}; });
    return b.inputs;
  }

  std::unique_ptr<Array> inputs_, labels_;
  std::int64_t classes_;
};

void register_plugins(runner::Registrar& registrar) {
  using O = NpyOptions;
  runner::OptionBinder<O> options;
  options.field("inputs", &O::inputs, ".npy of the inputs, one row per sample").path().required();
  options.field("labels", &O::labels, ".npy of the targets, one per sample (empty: none)").path();
  options.field("eval_inputs", &O::eval_inputs, ".npy of the held-out inputs (the eval split)").path();
  options.field("eval_labels", &O::eval_labels, ".npy of the held-out targets").path();
  options.field("classes", &O::classes,
                "classes of integer labels, each checked to be below it; 0: targets are not "
                "class indices")
      .range(0, 1 << 24);
  registrar.add_loader("npy", "inputs and labels from NumPy .npy files, memory-mapped", options,
                       [](const O& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<Npy>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
