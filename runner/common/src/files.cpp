// Output files written whole or not at all (see files.hpp).
#include "runner/common/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "runner/common/error.hpp"
#include "runner/common/output_path.hpp"

namespace runner {

namespace {

std::filesystem::path directory_of(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

[[noreturn]] void fail(const std::filesystem::path& path, int error) {
  throw Error("cannot write " + path.string() + ": " + std::strerror(error),
              "choose a file in a directory that exists and that you can write");
}

// Opens a fresh file next to `destination`; returns its descriptor.
int open_temporary(const std::filesystem::path& destination, std::filesystem::path& out) {
  std::string pattern =
      (directory_of(destination) / ("." + destination.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) fail(destination, errno);
  out = pattern;
  return fd;
}

}  // namespace

void check_output_path(const std::filesystem::path& path) {
  if (path.empty() || path.filename().empty())
    throw Error("cannot write '" + path.string() + "': not a file name",
                "give a file path, e.g. --out results/out.csv");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("cannot write " + path.string() + ": it is a directory",
                "give the path of a file inside it, e.g. " + (path / "out.csv").string());
  std::filesystem::path probe;
  const int fd = open_temporary(path, probe);
  ::close(fd);
  ::unlink(probe.c_str());
}

TemporaryFile::TemporaryFile(const std::filesystem::path& destination) : destination_(destination) {
  ::close(open_temporary(destination, path_));
}

TemporaryFile::~TemporaryFile() {
  if (!committed_) ::unlink(path_.c_str());
}

void TemporaryFile::commit() {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int sync_error = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) fail(destination_, sync_error);
  // rename() would replace a device, a FIFO or a symbolic link as readily as
  // a file: the rule is checked again at the last moment (the destructor
  // removes the temporary).
  OutputUse use;
  use.standard_output = false;
  refuse_non_regular(destination_, use);
  // mkstemp makes the file 0600; the result is an ordinary file (0666 & ~umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(path_.c_str(), 0666 & ~mask);
  if (::rename(path_.c_str(), destination_.c_str()) != 0) fail(destination_, errno);
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  TemporaryFile file(path);
  const int fd = ::open(file.path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) fail(path, errno);
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      fail(path, error);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) fail(path, errno);
  file.commit();
}

}  // namespace runner
