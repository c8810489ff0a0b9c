#include "record_files.hpp"

#include <runner/data_error.hpp>

#include <algorithm>

#include "labels.hpp"

namespace runner_loaders {

using runner::DataError;

std::int64_t check_cifar_file(const std::uint8_t* bytes, std::size_t size, std::int64_t label_bytes,
                              std::int64_t label_offset, std::int64_t classes,
                              const std::string& path) {
  const std::int64_t record = label_bytes + kCifarPixels;
  const auto n = static_cast<std::int64_t>(size);
  if (n == 0) throw DataError("'" + path + "' is empty");
  if (n % record != 0)
    throw DataError("'" + path + "' is truncated: " + std::to_string(n) +
                    " bytes is not a whole number of " + std::to_string(record) +
                    "-byte records (" + std::to_string(n / record) + " whole, " +
                    std::to_string(n % record) + " bytes over)");
  const std::int64_t records = n / record;
  check_labels(path, records, classes, label_offset, record,
               [&](std::int64_t r) { return bytes[r * record + label_offset]; });
  return records;
}

std::int64_t token_at(const std::uint8_t* bytes, std::int64_t width, std::int64_t i) {
  const std::uint8_t* p = bytes + i * width;
  std::int64_t v = 0;
  for (std::int64_t b = width - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

std::int64_t check_token_file(const std::uint8_t* bytes, std::size_t size, std::int64_t width,
                              std::int64_t vocab, const std::string& dtype,
                              const std::string& path) {
  const auto n = static_cast<std::int64_t>(size);
  if (n % width != 0)
    throw DataError("'" + path + "': " + std::to_string(n) + " bytes is not a whole number of " +
                    std::to_string(width) + "-byte tokens (dtype = \"" + dtype + "\")");
  const std::int64_t total = n / width;
  // Chunk by chunk: the largest id of a chunk first (vectorises), the first
  // bad one only in a chunk that has one.
  constexpr std::int64_t kChunk = 1 << 16;
  for (std::int64_t start = 0; start < total; start += kChunk) {
    const std::int64_t end = std::min(total, start + kChunk);
    std::int64_t most = 0;
    for (std::int64_t i = start; i < end; ++i) most = std::max(most, token_at(bytes, width, i));
    if (most < vocab) continue;
    for (std::int64_t i = start; i < end; ++i)
      if (const std::int64_t t = token_at(bytes, width, i); t >= vocab)
        throw DataError("'" + path + "': token " + std::to_string(i) + " (byte " +
                        std::to_string(i * width) + ") is " + std::to_string(t) +
                        ", outside the vocabulary of " + std::to_string(vocab));
  }
  return total;
}

}  // namespace runner_loaders
