// The schedule check of a comparison: how the runs of two sides were laid
// out in time, and the drift visible within each side, for a warning when the
// sides ran in separate blocks (a drift of the machine between the blocks
// then reads as an effect). Source: store/src/schedule_check.cpp.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace runner::store {

/// One run's value and when it started (seconds on any common clock).
struct TimedValue {
  double start_s = 0;
  double value = 0;
};

/// How the runs of two sides were laid out in time.
struct ScheduleCheck {
  /// Maximal stretches of one side in start order: 2 for two blocks, up to
  /// n_a + n_b for perfect alternation (descriptive; the verdict reads interleaving).
  std::size_t segments = 0;
  /// 1 - |2s - 1|, where s is the share of (A run, B run) pairs in which A's
  /// started first: 0 when all of A ran before all of B (or after), 1 when
  /// half the pairs go each way; at least (n - 1) / n for any schedule of
  /// rounds of n runs a side (A1 B1 ... A2 B2 ..., in any order within a
  /// round). 1 when each side has a single run.
  double interleaving = 1;
  /// interleaving < kInterleavedEnough: the sides' runs form separate blocks of time.
  bool separate_blocks = false;
  double span_a_s = 0, span_b_s = 0;   ///< first to last start of each side
  double gap_s = 0;                    ///< from A's mean start time to B's
  /// Least-squares trend of each side's values over its own span, in percent
  /// of its median (at least 3 runs).
  std::optional<double> drift_a_pct, drift_b_pct;
  /// The trend within the sides (pooled slope) carried over the gap between
  /// them, in percent of A's median: the part of B/A that drift alone would
  /// explain if it went on between the blocks.
  std::optional<double> gap_drift_pct;
};

/// Below this interleaving, sides count as run in separate blocks.
inline constexpr double kInterleavedEnough = 0.5;

/// Lays the runs of both sides out in time. Throws runner::Error on an empty side.
[[nodiscard]] ScheduleCheck check_schedule(const std::vector<TimedValue>& a,
                                           const std::vector<TimedValue>& b);

}  // namespace runner::store
