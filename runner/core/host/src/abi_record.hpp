// Reading a plugin library's ABI record from its file, without loading it.
#pragma once

#include <filesystem>

#include "runner/abi.hpp"

namespace runner::host::detail {

/// Reads the ABI record of the shared library at `path` from the file (ELF
/// section headers, every offset checked against the file size) and checks it
/// against this host. Nothing of the library runs. Throws runner::Error
/// (input) when the file is not an ELF shared library for this machine, has
/// no record (not a runner plugin), has a malformed record, or was built for
/// another runner (the expected/found message).
[[nodiscard]] PluginAbiRecord read_checked_abi_record(const std::filesystem::path& path);

}  // namespace runner::host::detail
