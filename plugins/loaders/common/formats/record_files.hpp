// The checks of the headerless record files: CIFAR's binary batches and flat
// token files. No LibTorch: the `cifar` and `tokens` loaders map the file
// and use these; the fuzz build runs them on hostile bytes
// (tests/fuzz/records_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace runner_loaders {

/// Pixel bytes of a CIFAR record: 3 planes of 32 x 32.
inline constexpr std::int64_t kCifarPixels = 3 * 32 * 32;

/// The records of a CIFAR file (the `size` bytes at `bytes`): each
/// `label_bytes` label bytes then kCifarPixels pixels; the label at
/// `label_offset` must be below `classes`. Refuses an empty file, a partial
/// record and a bad label, naming `path`. Throws runner::DataError.
[[nodiscard]] std::int64_t check_cifar_file(const std::uint8_t* bytes, std::size_t size,
                                            std::int64_t label_bytes, std::int64_t label_offset,
                                            std::int64_t classes, const std::string& path);

/// The token at `i` of a little-endian file of `width`-byte ids.
[[nodiscard]] std::int64_t token_at(const std::uint8_t* bytes, std::int64_t width, std::int64_t i);

/// The tokens of a flat file of `width`-byte (2 or 4) little-endian ids,
/// each below `vocab`. Refuses a partial token and names the first token
/// outside the vocabulary (`dtype` is the option's value, for the message).
/// Throws runner::DataError.
[[nodiscard]] std::int64_t check_token_file(const std::uint8_t* bytes, std::size_t size,
                                            std::int64_t width, std::int64_t vocab,
                                            const std::string& dtype, const std::string& path);

}  // namespace runner_loaders
