// What a run executes: the vocabulary shared by the experiment layer (the
// [experiment] kind key), the engine (which loop) and the store (runs.kind).
// Text appears only where a user or a file spells it: parse it there, print
// it with to_string.
#pragma once

#include <array>
#include <iosfwd>
#include <string_view>

namespace runner {

/// The loop a run executes.
enum class RunKind { train, infer };

/// Every kind, in declaration order (for messages that list them).
inline constexpr std::array<RunKind, 2> kRunKinds = {RunKind::train, RunKind::infer};

/// "train" | "infer": how experiment files, the store and the CLI spell a kind.
[[nodiscard]] constexpr const char* to_string(RunKind kind) {
  switch (kind) {
    case RunKind::train: return "train";
    case RunKind::infer: return "infer";
  }
  return "?";
}

/// The kind spelled `text`; throws runner::Error ("unknown run kind 'x'
/// (expected train or infer)") if it is none.
[[nodiscard]] RunKind parse_run_kind(std::string_view text);

/// Prints to_string(kind).
std::ostream& operator<<(std::ostream& out, RunKind kind);

}  // namespace runner
