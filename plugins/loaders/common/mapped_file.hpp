// A read-only memory map of a data file, shared by the file-backed loaders
// (header-only: each loader is its own library). Samples are read straight
// from the page cache; nothing is copied until a batch is collated.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include <runner/loader.hpp>
#include <runner/options.hpp>

namespace runner_loaders {

using runner::DataError;
using runner::OptionError;

/// The bytes of one file, mapped read-only for the object's lifetime.
class MappedFile {
 public:
  /// Maps `path`. A file that cannot be opened is the option's fault
  /// (OptionError naming `option`, reported at its file:line:col); one that
  /// opens but cannot be mapped is a DataError.
  MappedFile(const std::string& path, const std::string& option) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw OptionError(option, "cannot open '" + path + "': " + std::strerror(errno));
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw OptionError(option, "'" + path + "' is not a regular file");
    }
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int error = errno;
        ::close(fd);
        throw DataError("cannot map '" + path + "' into memory: " + std::strerror(error));
      }
      data_ = static_cast<const std::uint8_t*>(p);
    }
    ::close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept
      : path_(std::move(other.path_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  }

  /// The file's bytes (nullptr when it is empty).
  [[nodiscard]] const std::uint8_t* data() const { return data_; }
  /// Its size in bytes.
  [[nodiscard]] std::size_t size() const { return size_; }
  /// The path it was opened from, for messages.
  [[nodiscard]] const std::string& path() const { return path_; }
  /// Tells the kernel the file will be read at random (no read-ahead waste).
  void advise_random() const {
    if (data_ != nullptr) ::madvise(const_cast<std::uint8_t*>(data_), size_, MADV_RANDOM);
  }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace runner_loaders
