// The phases of a step, in one table: the engine's phase clock, the samples
// columns the store writes, reads and merges, the per-phase summaries and
// what the CLI compares all come from it. Adding a phase is an enumerator and
// a line of kPhases here, plus a schema migration step that adds its column
// (docs/store.md, "Adding a phase").
#pragma once

#include <array>
#include <cstddef>

namespace runner::store {

/// A phase of a training step or inference batch. Infer steps use data, h2d
/// and forward only; h2d only on a device other than the CPU; comm only in
/// distributed runs.
enum class Phase : std::size_t { data, h2d, forward, backward, optimizer, comm };

/// How one phase is named and stored.
struct PhaseInfo {
  Phase phase;
  const char* name;    ///< the summary metric and the CLI's label ("data")
  const char* column;  ///< its REAL column in the samples table ("data_ns"); NULL: did not happen
};

/// Every phase, in enum order.
inline constexpr std::array kPhases = {
    PhaseInfo{Phase::data, "data", "data_ns"},                 // waiting for the batch
    PhaseInfo{Phase::h2d, "h2d", "h2d_ns"},                    // host-to-device copy
    PhaseInfo{Phase::forward, "forward", "forward_ns"},        // forward pass and loss
    PhaseInfo{Phase::backward, "backward", "backward_ns"},     // backward pass (train)
    PhaseInfo{Phase::optimizer, "optimizer", "optimizer_ns"},  // optimizer step (train)
    PhaseInfo{Phase::comm, "comm", "comm_ns"},                 // gradient reduction (distributed)
};

/// Number of phases.
inline constexpr std::size_t kPhaseCount = kPhases.size();

/// Position of a phase in kPhases and in PhaseTimes.
[[nodiscard]] constexpr std::size_t phase_index(Phase phase) {
  return static_cast<std::size_t>(phase);
}

/// The table entry of a phase.
[[nodiscard]] constexpr const PhaseInfo& phase_info(Phase phase) {
  return kPhases[phase_index(phase)];
}

/// The phase's name ("data", "forward", ...).
[[nodiscard]] constexpr const char* to_string(Phase phase) { return phase_info(phase).name; }

/// Nanoseconds per phase, by phase_index(); negative: the phase did not happen.
using PhaseTimes = std::array<double, kPhaseCount>;

/// PhaseTimes with no phase marked (every entry -1).
[[nodiscard]] constexpr PhaseTimes no_phase_times() {
  PhaseTimes times{};
  times.fill(-1);
  return times;
}

namespace detail {
constexpr bool phases_in_enum_order() {
  for (std::size_t i = 0; i < kPhases.size(); ++i)
    if (phase_index(kPhases[i].phase) != i) return false;
  return true;
}
}  // namespace detail
static_assert(detail::phases_in_enum_order(), "kPhases must list every Phase once, in enum order");

}  // namespace runner::store
