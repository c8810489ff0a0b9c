// Optimizer plugins: build a torch::optim::Optimizer (and a learning-rate
// schedule) over the model's parameters.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace runner {

/// What an optimizer factory gets.
struct OptimizerContext {
  std::vector<torch::Tensor> parameters;  ///< trainable parameters of the model, in module order
  std::int64_t total_steps = 0;           ///< steps the run will take (warm-up included), for schedules
};

/// An optimizer under test.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// The LibTorch optimizer the engine calls zero_grad() and step() on.
  virtual torch::optim::Optimizer& get() = 0;
  /// Called after every optimizer step with the 0-based step index; update
  /// learning rates here. The default keeps them constant.
  virtual void on_step_end(std::int64_t step) {}
};

}  // namespace runner
