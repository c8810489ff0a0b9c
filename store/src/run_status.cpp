// RunStatus from its name (see run_status.hpp).
#include "runner/store/run_status.hpp"

#include <ostream>

#include "runner/common/enum_names.hpp"

namespace runner::store {

RunStatus parse_run_status(std::string_view text) {
  return parse_enum(text, kRunStatuses, "run status");
}

std::ostream& operator<<(std::ostream& out, RunStatus status) { return out << to_string(status); }

}  // namespace runner::store
