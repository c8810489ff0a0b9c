// Loader plugins: sample-level access to a data set. The host's data pipeline
// does ordering (seeded shuffle), batching and device transfer, and measures
// how long each step waits for its batch.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace runner {

/// One sample: input and target (target may be undefined for unlabelled data).
struct Example {
  torch::Tensor input;   ///< one sample, no batch dimension
  torch::Tensor target;  ///< its label or regression target
};

/// A batch of samples: inputs and targets stacked along dimension 0.
struct Batch {
  torch::Tensor inputs;    ///< [batch, ...sample shape]
  torch::Tensor targets;   ///< [batch, ...] or undefined
  std::int64_t size = 0;   ///< number of samples
};

/// Shape and task of a data set, used to build the model for it.
struct DataSpec {
  std::vector<std::int64_t> input_shape;  ///< shape of one input sample
  std::int64_t num_classes = 0;           ///< classes; 0 when not classification
};

/// Which part of a data set a loader serves.
enum class Split {
  train,  ///< the samples training steps (and inference) read
  eval,   ///< held-out samples for evaluation, disjoint from train where the data allows
};

/// What a loader factory knows about the run.
struct LoaderContext {
  std::uint64_t seed = 0;   ///< the run's seed; loaders that generate data must use it
  std::int64_t rank = 0;    ///< this process's rank (data-parallel runs)
  std::int64_t world_size = 1;  ///< number of ranks
  Split split = Split::train;  ///< which part of the data set this instance serves
};

/// A data set with random access.
class Loader {
 public:
  virtual ~Loader() = default;
  /// Shape and task of the samples.
  [[nodiscard]] virtual DataSpec spec() const = 0;
  /// Number of samples.
  [[nodiscard]] virtual std::int64_t size() const = 0;
  /// Sample `index` in [0, size()).
  virtual Example get(std::int64_t index) = 0;
  /// The samples at `indices`, stacked. The default stacks get(i); loaders
  /// that can gather a batch at once should override it.
  virtual Batch get_batch(const std::vector<std::int64_t>& indices) {
    std::vector<torch::Tensor> inputs, targets;
    inputs.reserve(indices.size());
    targets.reserve(indices.size());
    for (std::int64_t i : indices) {
      Example e = get(i);
      inputs.push_back(std::move(e.input));
      if (e.target.defined()) targets.push_back(std::move(e.target));
    }
    Batch b;
    b.inputs = torch::stack(inputs);
    if (!targets.empty()) b.targets = torch::stack(targets);
    b.size = static_cast<std::int64_t>(indices.size());
    return b;
  }
};

}  // namespace runner
