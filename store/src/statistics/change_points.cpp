// Change points of a series of repeated measurements: E-Divisive means
// (Matteson & James 2014, as MongoDB's CI and Hunter use it) on pooled ranks,
// with a permutation test of each split (see statistics.hpp and
// docs/method.md, "Change points").
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "checks.hpp"
#include "index_drawer.hpp"
#include "runner/common/error.hpp"
#include "runner/store/statistics.hpp"

namespace runner::store {
namespace {

// A value of the series: its pooled rank (what the statistic reads, so one
// outlying run weighs no more than the slowest ordinary one) and its place
// in the sorted order of its segment (the index of the Fenwick trees).
struct Obs {
  double rank = 0;
  std::size_t order = 0;
};

// A contiguous run of points [first, last) and the values they hold.
struct Segment {
  std::size_t first = 0, last = 0;  // points
  std::size_t begin = 0, end = 0;   // values
};

// Count and sum of the values inserted so far, by sorted position.
class Fenwick {
 public:
  explicit Fenwick(std::size_t n) : count_(n + 1, 0), sum_(n + 1, 0) {}
  void add(std::size_t i, double v) {
    for (++i; i < count_.size(); i += i & (~i + 1)) {
      count_[i] += 1;
      sum_[i] += v;
    }
  }
  // Count and sum over positions [0, i).
  std::pair<double, double> prefix(std::size_t i) const {
    double c = 0, s = 0;
    for (; i > 0; i -= i & (~i + 1)) {
      c += count_[i];
      s += sum_[i];
    }
    return {c, s};
  }
  void clear() {
    std::fill(count_.begin(), count_.end(), 0);
    std::fill(sum_.begin(), sum_.end(), 0);
  }

 private:
  std::vector<double> count_, sum_;
};

// Sum of |v - u| over the values u already in `tree` (`total` values, `sum` in all).
double distance_to_inserted(const Fenwick& tree, const Obs& o, double total_count, double total_sum) {
  const auto [below_n, below_s] = tree.prefix(o.order);
  const double above_n = total_count - below_n, above_s = total_sum - below_s;
  return o.rank * below_n - below_s + above_s - o.rank * above_n;
}

// The best split of one segment's values `v` (in series order) at the allowed
// offsets `cuts` (values before the split): the energy statistic
//   Q = k m / (k + m) * (2/(k m) sum|x - y| - sum|x - x'|/C(k,2) - sum|y - y'|/C(m,2))
// with alpha = 1, every pair sum from prefix and suffix sums kept in Fenwick
// trees over the segment's sorted order (n log n per segment).
struct Best {
  double q = -1;
  std::size_t cut = 0;  // index into cuts
};

class SplitScorer {
 public:
  Best best(const std::vector<Obs>& v, const std::vector<std::size_t>& cuts) {
    const std::size_t n = v.size();
    Best out;
    if (cuts.empty()) return out;
    left_.assign(n + 1, 0);
    right_.assign(n + 1, 0);
    tree_ = Fenwick(n);
    double count = 0, sum = 0;
    for (std::size_t k = 0; k < n; ++k) {  // left_[k + 1]: pairs within v[0..k]
      left_[k + 1] = left_[k] + distance_to_inserted(tree_, v[k], count, sum);
      tree_.add(v[k].order, v[k].rank);
      count += 1;
      sum += v[k].rank;
    }
    tree_.clear();
    count = sum = 0;
    for (std::size_t k = n; k-- > 0;) {  // right_[k]: pairs within v[k..n)
      right_[k] = right_[k + 1] + distance_to_inserted(tree_, v[k], count, sum);
      tree_.add(v[k].order, v[k].rank);
      count += 1;
      sum += v[k].rank;
    }
    const double total = left_[n];
    for (std::size_t c = 0; c < cuts.size(); ++c) {
      const std::size_t k = cuts[c];
      const double a = static_cast<double>(k), b = static_cast<double>(n - k);
      const double within_x = left_[k], within_y = right_[k];
      const double cross = total - within_x - within_y;
      double q = 2 * cross / (a * b);
      if (k > 1) q -= within_x / (a * (a - 1) / 2);
      if (n - k > 1) q -= within_y / (b * (b - 1) / 2);
      q *= a * b / (a + b);
      if (q > out.q) out = {q, c};
    }
    return out;
  }

 private:
  std::vector<double> left_, right_;
  Fenwick tree_{0};
};

// The series as the search sees it: every value's rank, where each point's
// values start, and the current segments.
class Search {
 public:
  Search(const std::vector<std::vector<double>>& points, const ChangePointOptions& options)
      : options_(options), drawer_(options.seed) {
    starts_.push_back(0);
    std::vector<double> values;
    for (const auto& p : points) {
      values.insert(values.end(), p.begin(), p.end());
      starts_.push_back(values.size());
    }
    // Pooled ranks, ties at their mean rank.
    std::vector<std::size_t> idx(values.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
    ranks_.assign(values.size(), 0);
    for (std::size_t i = 0; i < idx.size();) {
      std::size_t j = i;
      while (j < idx.size() && values[idx[j]] == values[idx[i]]) ++j;
      const double mean_rank = (static_cast<double>(i + j - 1)) / 2 + 1;
      for (std::size_t k = i; k < j; ++k) ranks_[idx[k]] = mean_rank;
      i = j;
    }
    segments_.push_back({0, points.size(), 0, values.size()});
  }

  // Splits the segments while the best split is significant; returns the
  // found changes (point index, p) in the order found.
  std::vector<std::pair<std::size_t, double>> run() {
    std::vector<std::pair<std::size_t, double>> found;
    for (;;) {
      std::vector<Prepared> prepared;
      for (const Segment& s : segments_) prepared.push_back(prepare(s));
      double observed = -1;
      std::size_t which = 0, cut_point = 0;
      for (std::size_t i = 0; i < prepared.size(); ++i) {
        const Best b = scorer_.best(prepared[i].obs, prepared[i].cuts);
        if (b.q > observed) {
          observed = b.q;
          which = i;
          cut_point = prepared[i].cut_points[b.cut];
        }
      }
      if (observed <= 0) break;
      const double p = permutation_p(prepared, observed);
      if (!(p < options_.alpha)) break;
      found.emplace_back(cut_point, p);
      const Segment s = segments_[which];
      const Segment left{s.first, cut_point, s.begin, starts_[cut_point]};
      const Segment right{cut_point, s.last, starts_[cut_point], s.end};
      segments_[which] = left;
      segments_.insert(segments_.begin() + static_cast<std::ptrdiff_t>(which) + 1, right);
    }
    return found;
  }

 private:
  struct Prepared {
    std::vector<Obs> obs;                // in series order
    std::vector<std::size_t> cuts;       // allowed splits, as values before the split
    std::vector<std::size_t> cut_points; // the same, as the point where the new level starts
  };

  Prepared prepare(const Segment& s) const {
    Prepared out;
    const std::size_t n = s.end - s.begin;
    out.obs.resize(n);
    std::vector<std::size_t> idx(n);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return ranks_[s.begin + a] < ranks_[s.begin + b];
    });
    for (std::size_t pos = 0; pos < n; ++pos) out.obs[idx[pos]] = {ranks_[s.begin + idx[pos]], pos};
    for (std::size_t point = s.first + 1; point < s.last; ++point) {
      const std::size_t k = starts_[point] - s.begin;
      // An empty point adds no split of its own: the new level starts at the next point with values.
      if (starts_[point + 1] == starts_[point]) continue;
      if (k >= options_.min_segment_runs && n - k >= options_.min_segment_runs) {
        out.cuts.push_back(k);
        out.cut_points.push_back(point);
      }
    }
    return out;
  }

  // The share of permutations (values shuffled within each segment, each
  // segment's split positions kept) whose best split scores at least
  // `observed`, counting the observed order: (1 + hits) / (1 + permutations).
  // Stops as soon as the p-value can no longer fall below alpha.
  double permutation_p(std::vector<Prepared>& prepared, double observed) {
    const int permutations = options_.permutations;
    const double give_up = options_.alpha * (permutations + 1);
    int hits = 0, done = 0;
    for (; done < permutations; ++done) {
      double best = -1;
      for (Prepared& p : prepared) {
        if (p.cuts.empty()) continue;
        for (std::size_t i = p.obs.size(); i > 1; --i)
          std::swap(p.obs[i - 1], p.obs[drawer_.draw(static_cast<std::uint32_t>(i))]);
        best = std::max(best, scorer_.best(p.obs, p.cuts).q);
      }
      // A tolerance, so that a permutation that reorders equal ranks only counts as a tie.
      if (best >= observed * (1 - 1e-12)) ++hits;
      if (hits + 1 >= give_up) return 1.0;
    }
    return (1.0 + hits) / (1.0 + done);
  }

  const ChangePointOptions& options_;
  detail::IndexDrawer drawer_;
  std::vector<std::size_t> starts_;  // starts_[i]: first value of point i; starts_.back(): count
  std::vector<double> ranks_;
  std::vector<Segment> segments_;
  SplitScorer scorer_;
};

void require_options(const ChangePointOptions& o) {
  detail::require_alpha(o.alpha);
  if (o.permutations < 19)
    throw Error("change points: permutations must be at least 19, got " + std::to_string(o.permutations));
  if (o.min_segment_runs < 1) throw Error("change points: min_segment_runs must be at least 1");
}

std::vector<double> values_of(const std::vector<std::vector<double>>& points, std::size_t from,
                              std::size_t to) {
  std::vector<double> out;
  for (std::size_t i = from; i < to; ++i) out.insert(out.end(), points[i].begin(), points[i].end());
  return out;
}

// Each change's level before and after it, from the neighbouring changes.
std::vector<ChangePoint> describe(const std::vector<std::vector<double>>& points,
                                  const std::vector<std::pair<std::size_t, double>>& changes,
                                  const ChangePointOptions& options) {
  std::vector<ChangePoint> out;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const std::size_t from = i == 0 ? 0 : changes[i - 1].first;
    const std::size_t to = i + 1 == changes.size() ? points.size() : changes[i + 1].first;
    const std::vector<double> before = values_of(points, from, changes[i].first);
    const std::vector<double> after = values_of(points, changes[i].first, to);
    ChangePoint c;
    c.index = changes[i].first;
    c.runs_before = before.size();
    c.runs_after = after.size();
    c.before = median(before);
    c.after = median(after);
    c.ratio = bootstrap_median_ratio(before, after, options.bootstrap);
    c.p_value = changes[i].second;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<ChangePoint> find_change_points(const std::vector<std::vector<double>>& points,
                                            const ChangePointOptions& options) {
  require_options(options);
  for (std::size_t i = 0; i < points.size(); ++i)
    for (double v : points[i])
      if (!(std::isfinite(v) && v > 0))
        throw Error("change points: point " + std::to_string(i) + " has a value that is not finite and positive (" +
                    detail::num(v) + ")");
  std::vector<std::pair<std::size_t, double>> changes = Search(points, options).run();
  std::sort(changes.begin(), changes.end());
  // A split the ranks call significant but whose levels' ratio interval
  // holds 1 (only the spread moved, or the tails) is not a change of level:
  // drop the weakest such one and describe the rest again.
  for (;;) {
    std::vector<ChangePoint> described = describe(points, changes, options);
    std::size_t weakest = described.size();
    for (std::size_t i = 0; i < described.size(); ++i) {
      const RatioInterval& r = described[i].ratio;
      if (r.lower <= 1 && r.upper >= 1 &&
          (weakest == described.size() || described[i].p_value > described[weakest].p_value))
        weakest = i;
    }
    if (weakest == described.size()) return described;
    changes.erase(changes.begin() + static_cast<std::ptrdiff_t>(weakest));
  }
}

}  // namespace runner::store
