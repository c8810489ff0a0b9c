// The schedule check of a comparison: interleaving of the two sides' runs in
// time and the drift within each side (see schedule_check.hpp).
#include "runner/store/schedule_check.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {
namespace {

// Least-squares slope of value / median over start time, per second, with the
// sums a pooled slope needs.
struct Trend {
  double sxy = 0, sxx = 0, mean_t = 0;
  [[nodiscard]] std::optional<double> slope() const {
    return sxx > 0 ? std::optional<double>(sxy / sxx) : std::nullopt;
  }
};

Trend trend_of(const std::vector<TimedValue>& side) {
  std::vector<double> values;
  for (const auto& v : side) values.push_back(v.value);
  const double mid = median(values);
  Trend t;
  double mean_y = 0;
  for (const auto& v : side) {
    t.mean_t += v.start_s;
    mean_y += v.value / mid;
  }
  t.mean_t /= static_cast<double>(side.size());
  mean_y /= static_cast<double>(side.size());
  for (const auto& v : side) {
    t.sxy += (v.start_s - t.mean_t) * (v.value / mid - mean_y);
    t.sxx += (v.start_s - t.mean_t) * (v.start_s - t.mean_t);
  }
  return t;
}

std::pair<double, double> span_of(const std::vector<TimedValue>& side) {
  double first = side.front().start_s, last = first;
  for (const auto& v : side) {
    first = std::min(first, v.start_s);
    last = std::max(last, v.start_s);
  }
  return {first, last};
}

}  // namespace

ScheduleCheck check_schedule(const std::vector<TimedValue>& a, const std::vector<TimedValue>& b) {
  if (a.empty() || b.empty()) throw Error("check_schedule: each side needs at least one run");
  ScheduleCheck check;
  std::vector<std::pair<double, int>> order;
  for (const auto& v : a) order.emplace_back(v.start_s, 0);
  for (const auto& v : b) order.emplace_back(v.start_s, 1);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  check.segments = 1;
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i].second != order[i - 1].second) ++check.segments;
  // Blocks are told by the order of the runs, not by how often the sides
  // alternate: in a sweep of k trials run as rounds (A1 B1 C1 ... A2 B2 C2
  // ...) two pooled sides alternate rarely and each pair of trials only once
  // a round, yet every round holds both. The share of (A, B) pairs in which
  // A's run started first is 1 when all of A ran before all of B, 0 for the
  // reverse, and near one half for any interleaved schedule, shuffled or not.
  double a_first_pairs = 0;
  for (const auto& x : a)
    for (const auto& y : b)
      a_first_pairs += x.start_s < y.start_s ? 1 : x.start_s == y.start_s ? 0.5 : 0;
  const double share = a_first_pairs / static_cast<double>(a.size() * b.size());
  check.interleaving = a.size() == 1 && b.size() == 1 ? 1.0 : 1 - std::abs(2 * share - 1);
  check.separate_blocks = check.interleaving < kInterleavedEnough;
  const auto [a_first, a_last] = span_of(a);
  const auto [b_first, b_last] = span_of(b);
  check.span_a_s = a_last - a_first;
  check.span_b_s = b_last - b_first;
  const Trend ta = trend_of(a), tb = trend_of(b);
  check.gap_s = tb.mean_t - ta.mean_t;
  if (a.size() >= 3)
    if (const auto slope = ta.slope()) check.drift_a_pct = 100 * *slope * check.span_a_s;
  if (b.size() >= 3)
    if (const auto slope = tb.slope()) check.drift_b_pct = 100 * *slope * check.span_b_s;
  if (a.size() >= 3 && b.size() >= 3 && ta.sxx + tb.sxx > 0)
    check.gap_drift_pct = 100 * (ta.sxy + tb.sxy) / (ta.sxx + tb.sxx) * check.gap_s;
  return check;
}

}  // namespace runner::store
