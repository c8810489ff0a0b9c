// SHA-256 digests (OpenSSL) for plugin files and resolved configurations.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace runner {

/// Lowercase hex SHA-256 of a byte string.
[[nodiscard]] std::string sha256_hex(std::string_view data);

/// Lowercase hex SHA-256 of a file's contents; throws runner::Error if unreadable.
[[nodiscard]] std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace runner
