// What the compare tests share: runs recorded straight into a store, so a
// comparison's sides and schedule are exactly what a test says.
#pragma once

#include <vector>

#include "runner/store/store.hpp"

namespace runner::test {

/// Records repetition `repeat` of `start`'s trial as finished: a step_time
/// median (and mean) of `p50` over 10 steps, with `metrics` beside it.
inline void record_finished(runner::store::Store& store, runner::store::RunStart start, int repeat,
                            double p50, const std::vector<runner::store::Metric>& metrics = {}) {
  start.repeat_index = repeat;
  const auto run = store.begin_run(start);
  runner::store::Summary summary;
  summary.metric = "step_time";
  summary.unit = "ns";
  summary.n = 10;
  summary.p50 = summary.mean = p50;
  store.finish_run(run, runner::store::RunStatus::finished, "", {summary}, metrics);
}

}  // namespace runner::test
