// The output-path rule (see output_path.hpp).
#include "runner/common/output_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "runner/common/files.hpp"

namespace runner {

namespace fs = std::filesystem;

bool names_standard_output(const fs::path& path) {
  const std::string text = path.lexically_normal().string();
  return path == "-" || text == "/dev/stdout" || text == "/dev/fd/1" ||
         text == "/proc/self/fd/1" || text == "/proc/" + std::to_string(::getpid()) + "/fd/1";
}

std::string non_regular_kind(const fs::path& path) {
  struct stat info {};
  // A path that cannot be looked at (a missing folder, no permission) is
  // left to the write itself, which reports the OS's reason.
  if (::lstat(path.c_str(), &info) != 0) return {};
  switch (info.st_mode & S_IFMT) {
    case S_IFREG: return {};
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
  }
}

void refuse_non_regular(const fs::path& path, const OutputUse& use) {
  const std::string kind = non_regular_kind(path);
  if (kind.empty()) return;
  const std::string option = use.option.empty() ? "path" : use.option;
  if (kind == "a directory")
    throw Error(use.where, "cannot write " + path.string() + ": it is a directory",
                "give the path of a file inside it, e.g. " + (path / use.example).string());
  std::string message = "cannot write " + path.string() + ": it is " + kind;
  std::string hint = "runner writes only to a new path or a regular file, and leaves anything "
                     "else as it is: give another " + option;
  if (kind == "a symbolic link") {
    std::error_code ec;
    const fs::path target = fs::read_symlink(path, ec);
    if (!ec) message += " (to " + target.string() + ")";
    hint += ", or the path it points to";
  }
  if (use.standard_output) hint += ", or - for standard output";
  throw Error(use.where, message, hint);
}

OutputTarget check_output(const fs::path& path, const OutputUse& use) {
  if (names_standard_output(path)) {
    if (use.standard_output) return OutputTarget::standard_output;
    throw Error(use.where,
                "cannot write " + use.what + " to standard output (" +
                    (use.option.empty() ? std::string() : use.option + " ") + path.string() + ")",
                "give a file, e.g. " +
                    (use.option.empty() ? std::string() : use.option + " ") + use.example);
  }
  refuse_non_regular(path, use);
  if (use.probe_folder) check_output_path(path);
  return OutputTarget::file;
}

}  // namespace runner
