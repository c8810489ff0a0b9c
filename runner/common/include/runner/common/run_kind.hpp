// What a run executes: the vocabulary shared by the experiment layer (the
// [experiment] kind key), the engine (which loop) and the store (runs.kind).
// Text appears only where a user or a file spells it: parse it there, print
// it with to_string.
#pragma once

#include <array>
#include <iosfwd>
#include <string_view>

namespace runner {

/// The loop a run executes: training steps, inference batches, or calls of
/// one kernel ([kernel] experiments, docs/kernels.md).
enum class RunKind { train, infer, kernel };

/// Every kind, in declaration order (for messages that list them).
inline constexpr std::array<RunKind, 3> kRunKinds = {RunKind::train, RunKind::infer,
                                                     RunKind::kernel};

/// "train" | "infer" | "kernel": how experiment files, the store and the CLI spell a kind.
[[nodiscard]] constexpr const char* to_string(RunKind kind) {
  switch (kind) {
    case RunKind::train: return "train";
    case RunKind::infer: return "infer";
    case RunKind::kernel: return "kernel";
  }
  return "?";
}

/// The summary a run of this kind is judged by: "step_time" (train),
/// "latency" (infer, one batch), "call_time" (kernel, one call). The
/// store's run_overview view spells the same mapping in SQL.
[[nodiscard]] constexpr const char* headline_metric(RunKind kind) {
  switch (kind) {
    case RunKind::train: return "step_time";
    case RunKind::infer: return "latency";
    case RunKind::kernel: return "call_time";
  }
  return "?";
}

/// The kind spelled `text`; throws runner::Error ("unknown run kind 'x'
/// (expected train, infer or kernel)") if it is none.
[[nodiscard]] RunKind parse_run_kind(std::string_view text);

/// Prints to_string(kind).
std::ostream& operator<<(std::ostream& out, RunKind kind);

}  // namespace runner
