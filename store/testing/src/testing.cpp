#include "runner/store/testing.hpp"

#include "schema.hpp"

namespace runner::store {

struct detail::StoreAccess {
  static sqlite3* handle(const Store& store) { return store.db_.get(); }
};

sqlite3* testing::handle(const Store& store) { return detail::StoreAccess::handle(store); }

const char* testing::migration_sql(int version) { return detail::migration_step(version); }

}  // namespace runner::store
