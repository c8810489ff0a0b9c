// Loader `synthetic`: a seeded, in-memory classification data set whose
// labels are a learnable function of the inputs (the arg-max of a fixed random
// linear "teacher"), so a model's loss really goes down. Generated once at
// construction, so batches cost a gather, as with a cached data set. The
// eval split holds as many other samples, labelled by the same teacher.
// dtype = "uint8" gives image-shaped data as image loaders do (uint8, 0..255).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <runner/sdk.hpp>

namespace {

struct SyntheticOptions {
  std::vector<std::int64_t> shape{64};
  std::int64_t classes = 10;
  std::int64_t size = 4096;
  double label_noise = 0.0;
  std::int64_t data_seed = 0;
  std::string dtype = "float32";
};

class Synthetic final : public runner::Loader {
 public:
  /// Mixed into the seed of the eval split's samples.
  static constexpr std::uint64_t kEvalStream = 0x9e3779b97f4a7c15ULL;

  Synthetic(const SyntheticOptions& options, const runner::LoaderContext& context)
      : shape_(options.shape), classes_(options.classes), size_(options.size) {
    // A private generator: the data set is a function of the seed alone, not
    // of whatever else touched LibTorch's global generator.
    const std::uint64_t seed = context.seed ^ static_cast<std::uint64_t>(options.data_seed);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    std::vector<std::int64_t> full{size_};
    full.insert(full.end(), shape_.begin(), shape_.end());
    inputs_ = at::randn(full, generator, torch::kFloat32);
    std::int64_t features = 1;
    for (auto d : shape_) features *= d;
    const torch::Tensor teacher = at::randn({features, classes_}, generator, torch::kFloat32);
    if (context.split == runner::Split::eval) {
      // Held out: as many new samples, labelled by the same teacher, from a
      // generator the training split never draws from.
      auto held_out = at::make_generator<at::CPUGeneratorImpl>(seed ^ kEvalStream);
      inputs_ = at::randn(full, held_out, torch::kFloat32);
      generator = held_out;
    }
    const torch::Tensor flat = inputs_.reshape({size_, features});
    targets_ = flat.matmul(teacher).argmax(1);
    if (options.dtype == "uint8") {
      // Images as a camera gives them: the same samples quantised to 0..255
      // (mean 128, 3 standard deviations to the ends), labelled as above.
      inputs_ = inputs_.mul(128.0 / 3.0).add_(128.0).round_().clamp_(0, 255).to(torch::kUInt8);
    }
    if (options.label_noise > 0) {
      const torch::Tensor flip = at::rand({size_}, generator) < options.label_noise;
      const torch::Tensor random_labels = at::randint(classes_, {size_}, generator, torch::kLong);
      targets_ = torch::where(flip, random_labels, targets_);
    }
  }

  runner::DataSpec spec() const override { return {shape_, classes_}; }
  std::int64_t size() const override { return size_; }

  runner::Example get(std::int64_t index) override {
    return {inputs_[index], targets_[index]};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    const torch::Tensor idx = torch::tensor(indices, torch::kLong);
    return {inputs_.index_select(0, idx), targets_.index_select(0, idx),
            static_cast<std::int64_t>(indices.size())};
  }

 private:
  std::vector<std::int64_t> shape_;
  std::int64_t classes_ = 0;
  std::int64_t size_ = 0;
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

void register_plugins(runner::Registrar& registrar) {
  using O = SyntheticOptions;
  runner::OptionBinder<O> options;
  options.field("shape", &O::shape, "shape of one input sample").range(1, 1 << 24).at_least(1);
  options.field("classes", &O::classes, "number of classes").range(2, 1 << 20);
  options.field("size", &O::size, "number of samples in the data set").range(1, 1LL << 32);
  options.field("label_noise", &O::label_noise, "fraction of labels replaced at random")
      .range(0.0, 1.0);
  options.field("data_seed", &O::data_seed, "mixed with the run seed to pick the data set")
      .range(0, std::nullopt);
  options.field("dtype", &O::dtype,
                "float32 (standard normal values), or uint8: the same samples as 0..255 images "
                "(the pipeline scales them to [0, 1] and augments them as images)")
      .one_of({"float32", "uint8"})
      .added_later_with_default();
  registrar.add_loader("synthetic",
                       "seeded in-memory classification data; labels from a random linear teacher",
                       options, [](const O& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<Synthetic>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
