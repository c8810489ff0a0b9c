// Loader plugins: sample-level access to a data set. The host's data pipeline
// (docs/data.md) does ordering (seeded shuffle, sharding by rank), decoding
// on worker threads, augmentation, batching and device transfer, and
// measures how long each step waits for its batch.
//
// Conventions the pipeline relies on:
// - Image samples are uint8 tensors [channels, height, width] (0..255). The
//   pipeline augments them as uint8 and converts the batch to float32 in
//   [0, 1] (torchvision's ToTensor) before [data] normalize; other dtypes
//   pass through unchanged.
// - get(), get_batch() and a stream's next() are called from the pipeline's
//   worker threads, several at once (data.workers > 1): they must be safe to
//   call concurrently (read-only state, or their own locking).
// - A factory checks what it can before training: that its files exist and
//   their headers are right. It throws runner::DataError naming the file and
//   the record or byte offset; the host reports it at validation (exit 2).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <runner/data_error.hpp>

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
  /// [data] on_error = "skip": a loader that checks its samples while it
  /// indexes them (an image folder) leaves bad ones out, counts them in
  /// skipped(), and does not throw.
  bool skip_bad_samples = false;
};

/// One epoch of a streaming data set, read in order.
class SampleStream {
 public:
  virtual ~SampleStream() = default;
  /// The next sample, or std::nullopt at the end of the epoch. Called by one
  /// thread at a time, in order.
  virtual std::optional<Example> next() = 0;
};

/// A data set: random access (the default: size() and get()) or streaming
/// (streaming() is true: open() and, when known, size()).
class Loader {
 public:
  virtual ~Loader() = default;
  /// Shape and task of the samples.
  [[nodiscard]] virtual DataSpec spec() const = 0;
  /// Number of samples; for a streaming data set, per epoch, or -1 when unknown.
  [[nodiscard]] virtual std::int64_t size() const = 0;
  /// Sample `index` in [0, size()). Streaming data sets need not override it.
  virtual Example get(std::int64_t index) {
    static_cast<void>(index);
    throw DataError("this data set is streaming: it has no random access");
  }
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
  /// Samples left out while indexing because they are bad (skip_bad_samples);
  /// the run records them with the ones the pipeline skips while reading.
  [[nodiscard]] virtual std::int64_t skipped() const { return 0; }
  /// True for a streaming data set: the pipeline reads open(epoch) in order
  /// instead of calling get().
  [[nodiscard]] virtual bool streaming() const { return false; }
  /// The samples of epoch `epoch` (0, 1, ...), in order. Each rank of a
  /// data-parallel run opens its own stream; the pipeline keeps every
  /// world_size-th sample from offset rank, so a loader need not shard.
  virtual std::unique_ptr<SampleStream> open(std::int64_t epoch) {
    static_cast<void>(epoch);
    throw DataError("this data set has random access: it cannot be opened as a stream");
  }
};

}  // namespace runner
