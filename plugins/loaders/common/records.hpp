// What the fixed-record file loaders share (cifar, mnist, npy): a label
// check that names the file, record and byte offset of the first bad label,
// and a batch gather that copies records straight out of a mapped file.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <runner/loader.hpp>

#include "formats/labels.hpp"

namespace runner_loaders {

using runner::Batch;
using runner::DataError;

/// Throws DataError when `index` is not a sample of a data set of `size`.
inline void check_index(std::int64_t index, std::int64_t size) {
  if (index < 0 || index >= size)
    throw DataError("sample " + std::to_string(index) + " is outside the data set's " +
                    std::to_string(size) + " samples");
}

/// A batch of `indices` whose sample i has `sample_bytes` bytes at
/// `source(i)`, copied into one tensor [batch, ...shape] of `dtype`, with
/// int64 targets from `label(i)`.
template <typename Source, typename Label>
Batch gather(const std::vector<std::int64_t>& indices, std::int64_t size,
             const std::vector<std::int64_t>& shape, torch::ScalarType dtype,
             std::size_t sample_bytes, Source source, Label label) {
  std::vector<std::int64_t> full{static_cast<std::int64_t>(indices.size())};
  full.insert(full.end(), shape.begin(), shape.end());
  Batch b;
  b.inputs = torch::empty(full, dtype);
  b.targets = torch::empty({static_cast<std::int64_t>(indices.size())}, torch::kLong);
  auto* out = static_cast<std::uint8_t*>(b.inputs.data_ptr());
  auto* targets = b.targets.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    check_index(indices[i], size);
    std::memcpy(out + i * sample_bytes, source(indices[i]), sample_bytes);
    targets[i] = label(indices[i]);
  }
  b.size = static_cast<std::int64_t>(indices.size());
  return b;
}

}  // namespace runner_loaders
