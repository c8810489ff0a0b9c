// Who could have put a plugin library where the host finds it (private to
// the host). A library another user can replace runs their code as us.
#pragma once

#include <filesystem>

namespace runner::host::detail {

/// Refuses (runner::Error, input) a library file that is writable by every
/// user, owned by a user other than this process's or root, or in a folder
/// that other users can write into (world-writable without the sticky bit,
/// or owned by another user).
void check_trusted_file(const std::filesystem::path& file);

/// Refuses a folder the host would scan for libraries when every user can
/// add files to it (world-writable, sticky or not) or it is owned by another user.
void check_trusted_folder(const std::filesystem::path& folder);

}  // namespace runner::host::detail
