#include "runner/store/run_status.hpp"

#include <ostream>
#include <string>

#include "runner/common/error.hpp"

namespace runner::store {

RunStatus parse_run_status(std::string_view text) {
  for (const RunStatus status : kRunStatuses)
    if (text == to_string(status)) return status;
  std::string expected;
  for (std::size_t i = 0; i < kRunStatuses.size(); ++i)
    expected += std::string(i == 0 ? "" : i + 1 == kRunStatuses.size() ? " or " : ", ") +
                to_string(kRunStatuses[i]);
  throw Error("unknown run status '" + std::string(text) + "' (expected " + expected + ")");
}

std::ostream& operator<<(std::ostream& out, RunStatus status) { return out << to_string(status); }

}  // namespace runner::store
