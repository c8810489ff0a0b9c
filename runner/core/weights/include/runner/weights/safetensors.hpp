// Safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype,
// shape and byte range, then the tensors' bytes. Read by memory-mapping the
// file and checking the header against it before any byte of a tensor is
// handed out; written to a temporary file renamed into place, so a file is
// either whole or absent. No LibTorch here: the model layer turns the byte
// ranges into tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace runner::weights {

/// The element types safetensors names ("F32", "BF16", ...).
enum class DType { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

/// Bytes per element.
[[nodiscard]] std::size_t dtype_size(DType dtype);
/// The file's name for it: "F32", "BF16", "BOOL", ...
[[nodiscard]] std::string_view dtype_name(DType dtype);

/// One tensor of a file: where its bytes are, relative to the data section.
struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< first byte, from the start of the data
  std::uint64_t end = 0;    ///< one past the last byte
};

/// The largest header runner reads (the format's own readers cap it at 100 MB).
inline constexpr std::uint64_t kMaxHeaderBytes = 100ULL << 20;

/// What a safetensors header says, checked against the size of its file.
struct SafetensorsHeader {
  std::uint64_t data_offset = 0;                ///< where the data starts: 8 + the header's length
  std::vector<TensorEntry> tensors;             ///< sorted by name
  std::map<std::string, std::string> metadata;  ///< the header's "__metadata__"
};

/// Checks the start of a safetensors file of `file_size` bytes: `head` is its
/// first bytes (the 8-byte length and the header it announces, or more; the
/// whole file will do). Every entry's byte range must match its dtype and
/// shape, lie inside the data, and the entries must cover the data without
/// overlap or gap. Reads no file and needs no LibTorch (the fuzz target calls
/// it). Throws runner::Error naming `path` and what is wrong.
[[nodiscard]] SafetensorsHeader parse_safetensors_header(std::span<const std::byte> head,
                                                         std::uint64_t file_size,
                                                         const std::filesystem::path& path);

/// A safetensors file, memory-mapped read-only and checked: every entry's
/// byte range matches its dtype and shape, lies inside the data, and the
/// entries cover the data without overlap or gap. Throws runner::Error
/// naming the file and what is wrong.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;

  /// The entries, sorted by name.
  [[nodiscard]] const std::vector<TensorEntry>& tensors() const { return tensors_; }
  /// The header's "__metadata__" (string to string; empty if absent).
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The bytes of one entry (valid while this object lives).
  [[nodiscard]] std::span<const std::byte> bytes(const TensorEntry& entry) const;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* map_ = nullptr;
  std::size_t size_ = 0;
  std::uint64_t data_offset_ = 0;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A tensor to write: its bytes in row-major order, little-endian.
struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

/// Writes `tensors` (names unique; each view's size must match its dtype and
/// shape) and `metadata` to `path` through a temporary file in the same
/// folder, renamed into place once complete. Throws runner::Error, also when
/// `path` is neither new nor a regular file (runner/common/output_path.hpp),
/// which is then left as it was.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace runner::weights
