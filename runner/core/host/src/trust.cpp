#include "trust.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

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

std::string shown(const std::filesystem::path& path) { return path.string(); }

struct stat stat_of(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw Error("cannot inspect plugin path '" + shown(path) + "'");
  return info;
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

std::string name_of_group(gid_t gid) {
  std::vector<char> buffer(16384);
  struct group entry {};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    return found->gr_name;
  return std::to_string(gid);
}

// Members of root's group administer the machine anyway. A user-private group
// (named after this user, their primary group, no other listed member: the
// Debian and Red Hat convention behind umask 002) holds nobody else, so its
// write bit lets in no one new. Any other group may hold other users.
bool trusted_group(gid_t gid) {
  if (gid == 0) return true;
  std::vector<char> buffer(16384);
  struct passwd user {};
  struct passwd* me = nullptr;
  if (::getpwuid_r(::geteuid(), &user, buffer.data(), buffer.size(), &me) != 0 || me == nullptr)
    return false;
  if (me->pw_gid != gid) return false;
  std::vector<char> group_buffer(16384);
  struct group entry {};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &entry, group_buffer.data(), group_buffer.size(), &found) != 0 ||
      found == nullptr || std::string(found->gr_name) != me->pw_name)
    return false;
  for (char** member = found->gr_mem; *member != nullptr; ++member)
    if (std::string(*member) != me->pw_name) return false;
  return true;
}

// Who besides this user and root can write to `info` ("" when nobody), with
// the chmod that takes the permission away.
struct OtherWriters {
  std::string who;
  std::string chmod;
};

OtherWriters other_writers(const struct stat& info) {
  if ((info.st_mode & S_IWOTH) != 0) return {"every user", "o-w"};
  if ((info.st_mode & S_IWGRP) != 0 && !trusted_group(info.st_gid))
    return {"the users of group '" + name_of_group(info.st_gid) + "'", "g-w"};
  return {};
}

void check_owner(const std::filesystem::path& path, const struct stat& info, const char* what) {
  if (trusted_owner(info.st_uid)) return;
  throw Error(std::string("plugin ") + what + " '" + shown(path) + "' is owned by user " +
                  std::to_string(info.st_uid) + ", not by you or root",
              std::string("load plugins only from your own or system folders, ") + kOverride);
}

// Every folder above `start` up to `/`: whoever can rename an entry in one of
// them can swap the whole subtree below it for their own, so the check of the
// last folder alone proves nothing (ld.so's secure mode and sudo's secure
// path walk the same chain). A sticky folder owned by root or this user (like
// /tmp) lets others rename only what they own, so it passes.
void check_ancestors(const std::filesystem::path& start, const std::filesystem::path& subject,
                     const char* what) {
  for (std::filesystem::path folder = start.parent_path();; folder = folder.parent_path()) {
    const struct stat info = stat_of(folder);
    if (!trusted_owner(info.st_uid))
      throw Error(std::string("plugin ") + what + " '" + shown(subject) + "' is inside " +
                      shown(folder) + ", which is owned by user " + std::to_string(info.st_uid) +
                      ", not by you or root: that user could put their own code in its place",
                  "move it under folders only you or root own, " + std::string(kOverride));
    const OtherWriters writers = other_writers(info);
    const bool sticky = (info.st_mode & S_ISVTX) != 0;
    if (!writers.who.empty() && !sticky)
      throw Error(std::string("plugin ") + what + " '" + shown(subject) + "' is inside " +
                      shown(folder) + ", which " + writers.who + " can write to (mode " +
                      octal(info.st_mode) + "): they could rename what is below it and put their "
                      "own code in its place",
                  "remove the write permission (chmod " + writers.chmod + " " + shown(folder) +
                      ") or set the sticky bit (chmod +t " + shown(folder) +
                      "), or move it elsewhere, " + kOverride);
    if (folder == folder.root_path() || folder == folder.parent_path()) return;
  }
}

}  // namespace

void check_trusted_file(const std::filesystem::path& file) {
  const struct stat info = stat_of(file);
  if (const OtherWriters writers = other_writers(info); !writers.who.empty())
    throw Error("plugin library '" + shown(file) + "' is writable by " + writers.who + " (mode " +
                    octal(info.st_mode) + "): anyone could replace it with their own code",
                "remove the write permission (chmod " + writers.chmod + "), " + kOverride);
  check_owner(file, info, "library");
  const std::filesystem::path folder = file.parent_path();
  const struct stat dir = stat_of(folder);
  // In a sticky folder (/tmp) others cannot replace a file they do not own.
  if (const OtherWriters writers = other_writers(dir);
      !writers.who.empty() && (dir.st_mode & S_ISVTX) == 0)
    throw Error("plugin library '" + shown(file) + "' is in a folder " + writers.who +
                    " can write to (" + shown(folder) + ", mode " + octal(dir.st_mode) +
                    "): anyone could replace it with their own code",
                "move it to a folder only you can write to (or chmod " + writers.chmod + " " +
                    shown(folder) + "), " + kOverride);
  check_owner(folder, dir, "folder");
  check_ancestors(folder, file, "library");
}

void check_trusted_folder(const std::filesystem::path& folder) {
  const struct stat info = stat_of(folder);
  if (const OtherWriters writers = other_writers(info); !writers.who.empty())
    throw Error("plugin folder '" + shown(folder) + "' is writable by " + writers.who +
                    " (mode " + octal(info.st_mode) + "): anyone could add a library to it",
                "load plugins from a folder only you can write to, " + std::string(kOverride));
  check_owner(folder, info, "folder");
  check_ancestors(folder, folder, "folder");
}

}  // namespace runner::host::detail
