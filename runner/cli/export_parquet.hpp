// Parquet for `runner export`: Debian has no Apache Arrow C++ package, so the
// table goes to Arrow's maintained Python binding, pyarrow, as typed JSON
// Lines, and a small embedded script writes the file (docs/export.md).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "export_table.hpp"

namespace runner::cli {

/// The Python that writes parquet: $RUNNER_PYTHON when set and not empty,
/// else the one this build was configured with (CMake's RUNNER_PYTHON) if
/// it is still there, else "python3" from PATH.
[[nodiscard]] std::string export_python();

/// Writes `table` to `destination` as parquet, whole or not at all: the
/// rows and the file go to temporary files beside it, renamed into place at
/// the end. Throws runner::Error (input) when the Python cannot be run or
/// cannot import pyarrow, naming it and how to fix it; (run) when it fails
/// otherwise, with its message. Returns the number of rows.
std::size_t write_parquet(const ExportTable& table, const std::filesystem::path& destination);

}  // namespace runner::cli
