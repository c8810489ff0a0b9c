// The directory of a zip archive (torch.save files, TorchScript archives,
// AOTInductor packages), read and checked by runner before any of the file
// is handed to LibTorch. No LibTorch here: the fuzz build runs it on hostile
// bytes (tests/fuzz/torch_save_fuzz.cpp, archive_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

namespace runner::weights {

/// A refused archive: what() says what is wrong ("its zip archive ...");
/// cut_short() is true when the end record is missing (a file not written or
/// copied completely).
class ZipError : public std::runtime_error {
 public:
  ZipError(const std::string& what, bool cut_short)
      : std::runtime_error(what), cut_short_(cut_short) {}
  [[nodiscard]] bool cut_short() const { return cut_short_; }

 private:
  bool cut_short_;
};

/// One record of the archive.
struct ZipEntry {
  std::string name;             ///< as stored ("archive/data.pkl")
  std::uint64_t data = 0;       ///< byte offset of its (stored) bytes in the file
  std::uint64_t stored = 0;     ///< bytes stored (compressed size)
  std::uint64_t size = 0;       ///< bytes once read (uncompressed size)
  std::uint16_t method = 0;     ///< 0: stored, 8: deflated
};

/// Reads up to `n` bytes of the file at `offset` (fewer only at its end).
using ZipRead = std::function<std::string(std::uint64_t offset, std::size_t n)>;

/// A ZipRead over an open file; `in` must outlive it.
[[nodiscard]] ZipRead zip_read_of(std::ifstream& in);

/// The most records accepted (a state dict of a large model has thousands).
inline constexpr std::uint64_t kMaxZipEntries = 1'000'000;

/// The records of the zip archive of `file_size` bytes that `read` reads,
/// in directory order. Checked: an end record (zip64 too) ending the file,
/// a directory inside the file, each entry's signature, lengths and zip64
/// fields, its local header, its stored bytes inside the file before the
/// directory, no two records overlapping, no name twice. Reads the end
/// record, the directory and each local header, never the records' bytes.
/// Throws ZipError.
[[nodiscard]] std::vector<ZipEntry> read_zip_directory(std::uint64_t file_size, const ZipRead& read);

/// The same for an archive held in memory.
[[nodiscard]] std::vector<ZipEntry> read_zip_directory(const std::string& bytes);

}  // namespace runner::weights
