// RunKind from its name (see run_kind.hpp).
#include "runner/common/run_kind.hpp"

#include <ostream>

#include "runner/common/enum_names.hpp"

namespace runner {

RunKind parse_run_kind(std::string_view text) { return parse_enum(text, kRunKinds, "run kind"); }

std::ostream& operator<<(std::ostream& out, RunKind kind) { return out << to_string(kind); }

}  // namespace runner
