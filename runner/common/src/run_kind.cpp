#include "runner/common/run_kind.hpp"

#include <ostream>
#include <string>

#include "runner/common/error.hpp"

namespace runner {

RunKind parse_run_kind(std::string_view text) {
  for (const RunKind kind : kRunKinds)
    if (text == to_string(kind)) return kind;
  std::string expected;
  for (std::size_t i = 0; i < kRunKinds.size(); ++i)
    expected += std::string(i == 0 ? "" : i + 1 == kRunKinds.size() ? " or " : ", ") +
                to_string(kRunKinds[i]);
  throw Error("unknown run kind '" + std::string(text) + "' (expected " + expected + ")");
}

std::ostream& operator<<(std::ostream& out, RunKind kind) { return out << to_string(kind); }

}  // namespace runner
