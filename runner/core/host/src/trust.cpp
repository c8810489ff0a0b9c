#include "trust.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "runner/common/error.hpp"

namespace runner::host::detail {
namespace {

constexpr const char* kOverride =
    "or pass --allow-unsafe-plugins (RUNNER_ALLOW_UNSAFE_PLUGINS=1) to load it anyway";

std::string octal(mode_t mode) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

struct stat stat_of(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw Error("cannot inspect plugin path '" + path.string() + "'");
  return info;
}

void check_owner(const std::filesystem::path& path, const struct stat& info, const char* what) {
  if (info.st_uid == 0 || info.st_uid == ::geteuid()) return;
  throw Error(std::string("plugin ") + what + " '" + path.string() + "' is owned by user " +
                  std::to_string(info.st_uid) + ", not by you or root",
              std::string("load plugins only from your own or system folders, ") + kOverride);
}

}  // namespace

void check_trusted_file(const std::filesystem::path& file) {
  const struct stat info = stat_of(file);
  if ((info.st_mode & S_IWOTH) != 0)
    throw Error("plugin library '" + file.string() + "' is writable by every user (mode " +
                    octal(info.st_mode) + "): anyone could replace it with their own code",
                std::string("remove the write permission (chmod o-w), ") + kOverride);
  check_owner(file, info, "library");
  const std::filesystem::path folder = file.parent_path();
  const struct stat dir = stat_of(folder);
  // In a sticky folder (/tmp) others cannot replace a file they do not own.
  if ((dir.st_mode & S_IWOTH) != 0 && (dir.st_mode & S_ISVTX) == 0)
    throw Error("plugin library '" + file.string() + "' is in a folder every user can write to (" +
                    folder.string() + ", mode " + octal(dir.st_mode) +
                    "): anyone could replace it with their own code",
                std::string("move it to a folder only you can write to, ") + kOverride);
  check_owner(folder, dir, "folder");
}

void check_trusted_folder(const std::filesystem::path& folder) {
  const struct stat info = stat_of(folder);
  if ((info.st_mode & S_IWOTH) != 0)
    throw Error("plugin folder '" + folder.string() + "' is writable by every user (mode " +
                    octal(info.st_mode) + "): anyone could add a library to it",
                std::string("load plugins from a folder only you can write to, ") + kOverride);
  check_owner(folder, info, "folder");
}

}  // namespace runner::host::detail
