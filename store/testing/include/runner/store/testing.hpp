// Test-only access to a Store's internals (linked only by tests, through the
// runner_store_testing library): assertions look at the file itself, not
// only at what the Store API reports.
#pragma once

#include "runner/store/store.hpp"

namespace runner::store::testing {

/// The store's raw connection (null for a moved-from store).
[[nodiscard]] sqlite3* handle(const Store& store);

/// The SQL of the migration step that creates schema `version` from the one
/// before (1: the initial schema), to build files of older versions.
/// Throws std::out_of_range for an unknown version.
[[nodiscard]] const char* migration_sql(int version);

}  // namespace runner::store::testing
