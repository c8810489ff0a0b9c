// Output files written whole or not at all: a command's result (a report, an
// export) goes to a temporary file beside its destination and is renamed into
// place, so a reader never sees half of it and a failure leaves no trace.
#pragma once

#include <filesystem>
#include <string_view>

namespace runner {

/// Throws runner::Error (input: exit 2) naming `path` and the reason when a
/// file cannot be written there: its directory is missing or not writable, or
/// `path` is a directory. Creates nothing (a probe file is removed at once).
void check_output_path(const std::filesystem::path& path);

/// A temporary file in the directory of `destination` (".NAME.tmp-XXXXXX"),
/// removed when this object is destroyed unless commit() renamed it into place.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::filesystem::path& destination);
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile();

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// Flushes the file to disk (fsync) and renames it to the destination.
  /// Throws runner::Error (input) with the OS reason, or when the destination
  /// is neither absent nor a regular file (output_path.hpp, left as it is);
  /// the temporary is removed then.
  void commit();

 private:
  std::filesystem::path destination_;
  std::filesystem::path path_;
  bool committed_ = false;
};

/// Writes `content` to `path` through a TemporaryFile. Throws runner::Error
/// (input) naming the path and the OS reason; `path` is unchanged then.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace runner
