// What the optimizer tests share: the built-in plugin folder, the small model
// every test optimizes (the oracle builds the same one) and options written
// as JSON, the way an experiment file writes them.
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <runner/sdk.hpp>

#include "runner/host/host.hpp"

namespace runner::test {

using Json = nlohmann::json;

inline const std::filesystem::path kBuiltins =
    std::filesystem::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

/// Plugin options from a JSON object: numbers are the plugins' floating-point
/// options, arrays of numbers their pairs (betas), arrays of strings their
/// patterns (no_decay).
inline runner::Options options_of(const Json& json) {
  std::map<std::string, runner::OptionValue> values;
  for (const auto& [name, value] : json.items()) {
    if (value.is_boolean()) {
      values[name] = value.get<bool>();
    } else if (value.is_number()) {
      values[name] = value.get<double>();
    } else if (value.is_string()) {
      values[name] = value.get<std::string>();
    } else if (!value.empty() && value[0].is_string()) {
      values[name] = value.get<std::vector<std::string>>();
    } else if (value.empty()) {
      values[name] = std::vector<std::string>{};
    } else {
      values[name] = value.get<std::vector<double>>();
    }
  }
  return runner::Options(std::move(values));
}

/// Linear(8, 16), LayerNorm(16), Linear(16, 4): parameters "0.weight",
/// "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"; with no_decay =
/// ["bias", "norm"] only 0.weight and 2.weight are decayed.
class TestModel {
 public:
  using Params = std::map<std::string, torch::Tensor>;

  /// The model with its parameters set to `initial` (by name), in their dtype.
  explicit TestModel(const Params& initial)
      : module_(torch::nn::Linear(8, 16), torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})),
                torch::nn::Linear(16, 4)) {
    torch::NoGradGuard no_grad;
    module_->to(initial.begin()->second.scalar_type());  // the reference's dtype
    for (auto& item : module_->named_parameters()) item.value().copy_(initial.at(item.key()));
  }

  /// What the host gives an optimizer factory for this model.
  runner::OptimizerContext context(torch::Device device = torch::kCPU) {
    return runner::make_optimizer_context(*module_, 10, device);
  }

  /// Sets every parameter's gradient to a copy of grads[name], or none when absent.
  void set_grads(const Params& grads) {
    for (auto& item : module_->named_parameters()) {
      const auto it = grads.find(item.key());
      item.value().mutable_grad() = it == grads.end() ? torch::Tensor() : it->second.clone();
    }
  }

  /// Copies of the parameters, by name.
  [[nodiscard]] Params parameters() const {
    Params out;
    for (const auto& item : module_->named_parameters())
      out[item.key()] = item.value().detach().clone();
    return out;
  }

 private:
  torch::nn::Sequential module_;
};

}  // namespace runner::test
