// The augmentations of [data]: resize, center_crop, random_crop (after zero
// padding), hflip, the uint8 -> [0, 1] float conversion and normalize, in
// that order, on whole batches. Random choices are drawn per sample from a
// generator seeded by (run seed, epoch, sample id), so a sample is augmented
// the same way whichever worker thread collates it.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runner/experiment/experiment.hpp"

namespace runner {

/// Settings that cannot apply to the samples (a crop larger than the image,
/// normalize_mean with the wrong number of channels). key() is the [data]
/// key at fault, so a caller holding the experiment can point at it.
class AugmentError : public Error {
 public:
  AugmentError(std::string key, const std::string& message, std::string hint = {})
      : Error(message, std::move(hint)), key_(std::move(key)) {}
  [[nodiscard]] const std::string& key() const { return key_; }

 private:
  std::string key_;
};

/// The seed of one sample's random choices: a function of its inputs only.
[[nodiscard]] std::uint64_t sample_seed(std::uint64_t run_seed, std::int64_t epoch,
                                        std::int64_t sample);

class Augmenter {
 public:
  /// For training (`train`), or for evaluation: then random_crop becomes a
  /// center crop of the same size (no padding) and hflip is off, as
  /// torchvision recipes evaluate.
  Augmenter(AugmentSettings settings, std::uint64_t seed, bool train);

  /// The shape of a sample after augmentation. Throws AugmentError when the
  /// settings do not apply to samples of `input` shape.
  [[nodiscard]] std::vector<std::int64_t> output_shape(const std::vector<std::int64_t>& input) const;
  /// True when any augmentation is on.
  [[nodiscard]] bool active() const { return settings_.any(); }
  /// The batch `inputs` ([batch, ...sample]) augmented; `ids` are the
  /// samples' ids (one per row) and `epoch` the epoch they were drawn in.
  /// uint8 inputs (images) come back as float32 in [0, 1], augmented or
  /// not; others keep their dtype.
  [[nodiscard]] torch::Tensor apply(const torch::Tensor& inputs, const std::vector<std::int64_t>& ids,
                                    std::int64_t epoch) const;

 private:
  AugmentSettings settings_;
  std::uint64_t seed_;
  bool train_;
};

}  // namespace runner
