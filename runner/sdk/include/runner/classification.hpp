// ClassificationModel: the base of a classifier plugin. A subclass is its
// constructor (layers registered on the base's module) and its forward over
// the input tensor; the base checks the data, owns the module, and provides
// the cross-entropy loss and example batches.
//
//   class TinyNet final : public runner::ClassificationModel {
//    public:
//     explicit TinyNet(const runner::ModelContext& context)
//         : ClassificationModel(context),
//           head_(register_module("head", torch::nn::Linear(input_features(), num_classes()))) {}
//     torch::Tensor forward(const torch::Tensor& x) override {
//       return head_->forward(x.flatten(1));
//     }
//
//    private:
//     torch::nn::Linear head_;
//   };
#pragma once

#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runner/loader.hpp"
#include "runner/model.hpp"
#include "runner/options.hpp"

namespace runner {

/// A classifier over the loader's samples: forward(inputs) gives logits of
/// shape [batch, num_classes()].
class ClassificationModel : public Model {
 public:
  /// Checks the context (check_data) and keeps its sample shape and classes.
  explicit ClassificationModel(const ModelContext& context)
      : input_shape_(context.input_shape), num_classes_(context.num_classes) {
    check_data(context);
  }

  /// Throws std::invalid_argument unless the run's loader declares a sample
  /// shape and at least two classes: call it from a model's data check
  /// (Registrar::add_model) to find this before any run.
  static void check_data(const ModelContext& context) {
    if (context.input_shape.empty())
      throw std::invalid_argument(
          "a classification model needs the sample shape from the loader; add a [data] "
          "section whose loader declares its input shape");
    if (context.num_classes < 2)
      throw std::invalid_argument(
          "a classification model needs a loader with at least 2 classes; the loader declares " +
          std::to_string(context.num_classes));
  }

  /// `context` with the head's classes set to `num_classes`, the value of
  /// option `option` (0: the loader's, unchanged); throws
  /// runner::OptionError(option) when it is fewer than the loader's classes.
  static ModelContext with_classes(ModelContext context, std::int64_t num_classes,
                                   const std::string& option = "num_classes") {
    if (num_classes == 0) return context;
    if (context.num_classes > num_classes)
      throw OptionError(option, option + " = " + std::to_string(num_classes) +
                                    " is fewer than the loader's " +
                                    std::to_string(context.num_classes) +
                                    " classes; raise it or leave it at 0 (the loader's)");
    context.num_classes = num_classes;
    return context;
  }

  /// The logits for a batch of inputs ([batch, ...input_shape()]).
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;

  /// The root module; subclasses register their layers on it.
  torch::nn::Module& module() override { return *root_; }

  /// forward(batch.inputs).
  torch::Tensor forward(const Batch& batch) override { return forward(batch.inputs); }

  /// Cross-entropy between the logits and the batch's class targets.
  torch::Tensor loss(const torch::Tensor& output, const Batch& batch) override {
    return torch::nn::functional::cross_entropy(output, batch.targets);
  }

  /// Loss and top-1 accuracy, each summed over the batch's samples.
  EvalTally evaluate(const torch::Tensor& output, const Batch& batch) override {
    EvalTally tally;
    tally.count = static_cast<double>(batch.size);
    tally.sums["loss"] = loss(output, batch).item<double>() * tally.count;
    tally.sums["accuracy"] =
        output.argmax(1).eq(batch.targets).sum().item<double>();
    return tally;
  }

  /// Random normal inputs of the loader's shape and uniformly random classes.
  Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    std::vector<std::int64_t> shape{batch_size};
    shape.insert(shape.end(), input_shape_.begin(), input_shape_.end());
    const auto on_device = torch::TensorOptions().device(device);
    return {torch::randn(shape, on_device),
            torch::randint(num_classes_, {batch_size}, on_device.dtype(torch::kLong)),
            batch_size};
  }

 protected:
  /// Shape of one input sample (no batch dimension).
  [[nodiscard]] const std::vector<std::int64_t>& input_shape() const { return input_shape_; }
  /// Number of elements of one input sample.
  [[nodiscard]] std::int64_t input_features() const {
    std::int64_t n = 1;
    for (const std::int64_t d : input_shape_) n *= d;
    return n;
  }
  /// Number of classes.
  [[nodiscard]] std::int64_t num_classes() const { return num_classes_; }

  /// Registers a layer on the root module and returns it (as torch's register_module).
  template <typename ModuleType>
  ModuleType register_module(std::string name, ModuleType module) {
    return root_->register_module(std::move(name), std::move(module));
  }

 private:
  std::shared_ptr<torch::nn::Module> root_ = std::make_shared<torch::nn::Module>();
  std::vector<std::int64_t> input_shape_;
  std::int64_t num_classes_ = 0;
};

}  // namespace runner
