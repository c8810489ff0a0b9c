// Parameter groups for an optimizer plugin that wraps a LibTorch optimizer,
// and the runner::Optimizer that owns one.
//
// LibTorch's torch::optim::Optimizer::add_param_group merges each group's
// options with the optimizer's defaults: for the option types it knows
// (AdamOptions, SGDOptions, ...) a field equal to that type's constructor
// default takes the optimizer's default instead, so a no-decay group's
// weight_decay(0.0) silently becomes the decay group's; an options type it
// does not know is replaced by the defaults wholesale. Build the groups with
// decay_groups and call keep_group_options after the optimizer is made:
//
//   const auto groups = runner::decay_groups(context, o.no_decay, adam_options);
//   auto adam = std::make_unique<torch::optim::Adam>(groups, adam_options);
//   runner::keep_group_options(*adam, groups);
//   return std::make_unique<runner::OwnedOptimizer<torch::optim::Adam>>(std::move(adam));
#pragma once

#include <torch/optim/optimizer.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runner/optimizer.hpp"

namespace runner {

/// The parameter groups for `no_decay` patterns: every parameter in one
/// group with `options` when `no_decay` is empty; otherwise those matching no
/// pattern with `options`, then those matching one with weight decay 0
/// (split_parameters). Empty groups are left out. `GroupOptions` is a
/// LibTorch options type with weight_decay(double) (AdamOptions, SGDOptions, ...).
template <typename GroupOptions>
std::vector<torch::optim::OptimizerParamGroup> decay_groups(const OptimizerContext& context,
                                                            const std::vector<std::string>& no_decay,
                                                            const GroupOptions& options) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (no_decay.empty()) {
    groups.emplace_back(context.parameters, std::make_unique<GroupOptions>(options));
    return groups;
  }
  const ParameterSplit split = split_parameters(context.named_parameters, no_decay);
  if (!split.decay.empty())
    groups.emplace_back(split.decay, std::make_unique<GroupOptions>(options));
  if (!split.no_decay.empty()) {
    auto exempt = std::make_unique<GroupOptions>(options);
    exempt->weight_decay(0.0);
    groups.emplace_back(split.no_decay, std::move(exempt));
  }
  return groups;
}

/// Gives every group of `optimizer` exactly the options it was built with
/// (undoing add_param_group's merge, see above). Call it right after the
/// optimizer is constructed from `groups`.
inline void keep_group_options(torch::optim::Optimizer& optimizer,
                               const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  auto& added = optimizer.param_groups();
  TORCH_INTERNAL_ASSERT(added.size() == groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i)
    added[i].set_options(groups[i].options().clone());
}

/// The runner::Optimizer that owns a LibTorch optimizer `T`. When
/// `HasMomentum`, set_momentum forwards to T::set_momentum (which sets the
/// momentum or beta1 of every group) and returns true; otherwise a schedule
/// that cycles momentum is refused for this optimizer.
template <typename T, bool HasMomentum = false>
class OwnedOptimizer final : public Optimizer {
 public:
  /// Takes ownership of `optimizer`.
  explicit OwnedOptimizer(std::unique_ptr<T> optimizer) : optimizer_(std::move(optimizer)) {}
  /// The owned optimizer.
  torch::optim::Optimizer& get() override { return *optimizer_; }
  /// T::set_momentum(momentum) when HasMomentum; false otherwise.
  bool set_momentum(double momentum) override {
    if constexpr (HasMomentum) {
      optimizer_->set_momentum(momentum);
      return true;
    } else {
      static_cast<void>(momentum);
      return false;
    }
  }

 private:
  std::unique_ptr<T> optimizer_;
};

}  // namespace runner
