// Test plugin: the loader `tensor_file`, samples written by Python, so an
// end-to-end run trains on exactly the data a PyTorch script trains on
// (tests/cli/recipes). The file is what
//   torch.save({"inputs": X, "targets": Y, "eval_inputs": XE, "eval_targets": YE}, path)
// writes (the eval entries optional); samples are served in file order.
#include <torch/serialize.h>

#include <runner/sdk.hpp>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

struct TensorFileOptions {
  std::string path;
  std::int64_t classes = 0;
};

// Refusals name the option the experiment sets, so the host reports them
// at its file:line:col.
[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw runner::OptionError("path", "'" + path + "' " + what);
}

class TensorFile final : public runner::Loader {
 public:
  TensorFile(const TensorFileOptions& options, const runner::LoaderContext& context)
      : classes_(options.classes) {
    std::ifstream in(options.path, std::ios::binary);
    if (!in) refuse(options.path, "cannot be opened");
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    c10::IValue all;
    try {
      all = torch::pickle_load(bytes);
    } catch (const c10::Error& e) {
      refuse(options.path, std::string("is not a torch.save file LibTorch can read: ") +
                               e.what_without_backtrace());
    }
    if (!all.isGenericDict()) refuse(options.path, "holds no dict of tensors");
    const std::string prefix = context.split == runner::Split::eval ? "eval_" : "";
    inputs_ = entry(all, options.path, prefix + "inputs");
    targets_ = entry(all, options.path, prefix + "targets");
    if (inputs_.dim() < 2 || !inputs_.is_floating_point())
      refuse(options.path, "'" + prefix + "inputs' must be floating [samples, ...], found " +
                               std::string(c10::toString(inputs_.scalar_type())) + " of " +
                               std::to_string(inputs_.dim()) + " dimensions");
    if (targets_.dim() != 1 || targets_.scalar_type() != torch::kLong ||
        targets_.size(0) != inputs_.size(0))
      refuse(options.path, "'" + prefix + "targets' must be int64 [" +
                               std::to_string(inputs_.size(0)) + "], one class per input");
    if (targets_.numel() > 0 && (targets_.min().item<std::int64_t>() < 0 ||
                                 targets_.max().item<std::int64_t>() >= classes_))
      refuse(options.path, "'" + prefix + "targets' has classes outside [0, " +
                               std::to_string(classes_) + ")");
  }

  runner::DataSpec spec() const override {
    const auto sizes = inputs_.sizes();
    return {std::vector<std::int64_t>(sizes.begin() + 1, sizes.end()), classes_};
  }
  std::int64_t size() const override { return inputs_.size(0); }
  runner::Example get(std::int64_t index) override { return {inputs_[index], targets_[index]}; }
  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    const torch::Tensor idx = torch::tensor(indices, torch::kLong);
    return {inputs_.index_select(0, idx), targets_.index_select(0, idx),
            static_cast<std::int64_t>(indices.size())};
  }

 private:
  static torch::Tensor entry(const c10::IValue& all, const std::string& path,
                             const std::string& key) {
    const auto dict = all.toGenericDict();
    const auto it = dict.find(key);
    if (it == dict.end() || !it->value().isTensor())
      refuse(path, "has no tensor '" + key + "'");
    return it->value().toTensor().contiguous();
  }

  std::int64_t classes_;
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<TensorFileOptions> options;
  options.field("path", &TensorFileOptions::path, "file written by torch.save (absolute path)")
      .required();
  options.field("classes", &TensorFileOptions::classes, "number of classes")
      .range(2, 1 << 20)
      .required();
  registrar.add_loader("tensor_file", "samples from a torch.save dict of tensors (test plugin)",
                       options, [](const TensorFileOptions& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<TensorFile>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
