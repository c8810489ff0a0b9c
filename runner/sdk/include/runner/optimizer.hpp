// Optimizer plugins: build a torch::optim::Optimizer (and a learning-rate
// schedule) over the model's parameters, in parameter groups if they like.
//
// The context names every trainable parameter as named_parameters() does and
// says which kind of module owns it, so a recipe such as "no weight decay on
// biases and norms" is one call:
//
//   const runner::ParameterSplit split =
//       runner::split_parameters(context.named_parameters, {"bias", "norm"});
//   // split.decay: weights of Linear/Conv layers; split.no_decay: biases and
//   // BatchNorm/LayerNorm parameters.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runner {

/// A trainable parameter with its name and the type of the module that owns it.
struct NamedParameter {
  std::string name;         ///< as in module.named_parameters(): "features.0.weight"
  torch::Tensor tensor;     ///< the parameter itself
  std::string module_type;  ///< type name of the owning module: "torch::nn::BatchNorm2dImpl"
};

/// What an optimizer factory gets.
struct OptimizerContext {
  std::vector<torch::Tensor> parameters;          ///< trainable parameters, in module order
  std::vector<NamedParameter> named_parameters;   ///< the same parameters, named, same order
  torch::nn::Module* module = nullptr;            ///< the model's module (owned by the model)
  std::int64_t total_steps = 0;  ///< steps the run will take (warm-up included), for schedules
  /// Where the run trains. The parameters are there already, except when the
  /// host builds the optimizer before any run to check its options (then
  /// they are a CPU stand-in): decide device-dependent things (is there a
  /// fused kernel?) from this, not from the parameters.
  torch::Device device = torch::kCPU;
};

/// The context for the trainable parameters of `module` (what the host passes).
inline OptimizerContext make_optimizer_context(torch::nn::Module& module,
                                               std::int64_t total_steps,
                                               torch::Device device = torch::kCPU) {
  OptimizerContext context;
  context.module = &module;
  context.total_steps = total_steps;
  context.device = device;
  // Owner of each parameter: named_modules() lists every submodule under the
  // prefix named_parameters() uses. include_self = false works for a module
  // that is not held by a shared_ptr.
  std::map<std::string, std::string> owner_type;
  for (const auto& item : module.named_modules("", /*include_self=*/false))
    owner_type.emplace(item.key(), item.value()->name());
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    const auto dot = name.rfind('.');
    const auto owner = dot == std::string::npos ? owner_type.end()
                                                : owner_type.find(name.substr(0, dot));
    context.parameters.push_back(item.value());
    context.named_parameters.push_back(
        {name, item.value(), owner == owner_type.end() ? module.name() : owner->second});
  }
  return context;
}

/// Parameters split by a recipe's patterns (see split_parameters).
struct ParameterSplit {
  std::vector<torch::Tensor> decay;     ///< parameters no pattern matched
  std::vector<torch::Tensor> no_decay;  ///< parameters a pattern matched
};

/// True when `pattern` occurs in the parameter's name, or, ignoring case, in
/// its module's type name ("norm" matches every parameter of a BatchNorm2d or
/// LayerNorm, "bias" every parameter named *.bias).
inline bool matches(const NamedParameter& parameter, const std::string& pattern) {
  if (pattern.empty()) return false;
  if (parameter.name.find(pattern) != std::string::npos) return true;
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  return lower(parameter.module_type).find(lower(pattern)) != std::string::npos;
}

/// Splits parameters into those matching none of `no_decay_patterns` and
/// those matching at least one, each in its original order.
inline ParameterSplit split_parameters(const std::vector<NamedParameter>& parameters,
                                       const std::vector<std::string>& no_decay_patterns) {
  ParameterSplit split;
  for (const auto& p : parameters) {
    const bool exempt =
        std::any_of(no_decay_patterns.begin(), no_decay_patterns.end(),
                    [&](const std::string& pattern) { return matches(p, pattern); });
    (exempt ? split.no_decay : split.decay).push_back(p.tensor);
  }
  return split;
}

/// An optimizer under test.
///
/// The host drives it: zero_grad(), backward, then step() on get(). Around
/// that it may, by the experiment's choice, set each parameter group's
/// learning rate before step() ([schedule]; a group's lr option at
/// construction is its base), clip the gradients, and with precision =
/// "amp_fp16" unscale the gradients of every parameter in get().param_groups()
/// and skip step() when one is not finite. An optimizer whose parameter
/// groups do not hold the parameters it was given (one that steps private
/// copies) cannot be unscaled and is refused with amp_fp16.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// The LibTorch optimizer the engine calls zero_grad() and step() on.
  virtual torch::optim::Optimizer& get() = 0;
  /// Called after every optimizer step with the 0-based step index; update
  /// learning rates here. The default keeps them constant.
  virtual void on_step_end(std::int64_t step) { static_cast<void>(step); }
  /// Sets the momentum a one-cycle schedule cycles with the learning rate
  /// (SGD's and RMSprop's momentum, Adam's and Lion's beta1) in every
  /// parameter group, as PyTorch's OneCycleLR does. Returns false, changing
  /// nothing, when the optimizer has no such momentum (then a schedule with
  /// cycle_momentum = true is refused before the run starts).
  virtual bool set_momentum(double momentum) {
    static_cast<void>(momentum);
    return false;
  }
};

}  // namespace runner
