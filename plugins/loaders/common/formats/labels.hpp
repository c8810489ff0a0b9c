// The label check the fixed-record loaders share (cifar, mnist, npy): it
// names the file, record and byte offset of the first bad label. No LibTorch.
#pragma once

#include <runner/data_error.hpp>

#include <cstdint>
#include <string>

namespace runner_loaders {

/// Throws DataError when a label (one integer per record, at `first_offset`
/// + record x `stride` bytes of `file`, read by `label_at`) is outside
/// [0, classes).
template <typename LabelAt>
void check_labels(const std::string& file, std::int64_t records, std::int64_t classes,
                  std::int64_t first_offset, std::int64_t stride, LabelAt label_at) {
  for (std::int64_t r = 0; r < records; ++r) {
    const std::int64_t label = label_at(r);
    if (label < 0 || label >= classes)
      throw runner::DataError("'" + file + "': record " + std::to_string(r) + " (byte " +
                              std::to_string(first_offset + r * stride) + "): label " +
                              std::to_string(label) + " is outside the " +
                              std::to_string(classes) + " classes");
  }
}

}  // namespace runner_loaders
