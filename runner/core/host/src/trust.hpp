// Who could have put a plugin library where the host finds it (private to
// the host). A library another user can replace runs their code as us.
#pragma once

#include <filesystem>

namespace runner::host::detail {

/// Refuses (runner::Error, input) a library file that users other than this
/// process's and root could replace: the file writable by others (every user,
/// or a group that may hold other users), owned by another user, or any folder
/// from its own up to `/` that others can write into (unless sticky and owned
/// by root or this user, like /tmp) or that another user owns. `file` is the
/// resolved path the host then loads, so symlinks on the way do not count.
void check_trusted_file(const std::filesystem::path& file);

/// Refuses a folder the host would scan for libraries when others can add
/// files to it (sticky or not) or it is owned by another user, or when a
/// folder above it fails the test check_trusted_file() applies to folders.
void check_trusted_folder(const std::filesystem::path& folder);

}  // namespace runner::host::detail
