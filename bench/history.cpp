// The change-point method of `runner history` on real runs (docs/method.md,
// "Change points"); bench/history.sh records the runs and calls this.
//
//   runner-history-bench analyse VALUES   false alarms and power from real per-run values
//   runner-history-bench fill DB CONFIGS COMMITS REPEATS
//                                          a store of CONFIGS x COMMITS x REPEATS runs
//                                          written through the store API, for the timing
//
// VALUES holds lines "NAME VALUE": each run's median step time, in the order
// the runs were recorded, NAME "base", "step3" (a configuration about 3 %
// slower) or "step10" (about 10 % slower). Series are spliced from these real
// values: a point draws its repetitions at random from one configuration's
// runs, so the noise is the machine's, and the step is a real one.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace {

using Pool = std::vector<double>;
using Series = std::vector<std::vector<double>>;
namespace st = runner::store;

constexpr int kPoints = 30;

double pick(const Pool& pool, std::mt19937_64& rng) { return pool[rng() % pool.size()]; }

// `points` points of `repeats` values; from point `step_at` on (if any) drawn
// from `after` (scaled by `scale`), before it from `before`.
Series splice(const Pool& before, const Pool& after, double scale, int step_at, int repeats,
              std::mt19937_64& rng) {
  Series s(kPoints);
  for (int i = 0; i < kPoints; ++i)
    for (int r = 0; r < repeats; ++r)
      s[i].push_back(i >= step_at ? pick(after, rng) * scale : pick(before, rng));
  return s;
}

// Share of series where a change point of the right direction lies within 2
// points of where the step happened.
double power(const Pool& base, const Pool& after, double scale, int repeats, int series,
             std::mt19937_64& rng) {
  int found = 0;
  const bool up = st::median(after) * scale > st::median(base);
  for (int k = 0; k < series; ++k) {
    const int at = 5 + static_cast<int>(rng() % 21);  // 5 .. 25
    for (const st::ChangePoint& c : st::find_change_points(splice(base, after, scale, at, repeats, rng)))
      if (std::abs(static_cast<int>(c.index) - at) <= 2 && (c.ratio.ratio > 1) == up) {
        ++found;
        break;
      }
  }
  return static_cast<double>(found) / series;
}

int analyse(const char* path) {
  std::map<std::string, Pool> pools;
  std::ifstream in(path);
  std::string name;
  double v = 0;
  while (in >> name >> v) pools[name].push_back(v);
  const Pool& base = pools["base"];
  if (base.size() < 10 || pools["step3"].empty() || pools["step10"].empty()) {
    std::cerr << "error: " << path << " needs base, step3 and step10 runs\n";
    return 2;
  }
  std::mt19937_64 rng(34);
  std::printf("runs: base %zu, step3 %zu, step10 %zu\n", base.size(), pools["step3"].size(),
              pools["step10"].size());
  const auto cv = st::coefficient_of_variation(base);
  const auto robust = st::robust_variation(base);
  std::printf("run-to-run variation of base: CV %.2f %%, robust %.2f %%\n", cv.value_or(0) * 100,
              robust.value_or(0) * 100);
  for (const char* step : {"step3", "step10"}) {
    const st::RatioInterval r = st::bootstrap_median_ratio(base, pools[step]);
    std::printf("measured %s / base: %.4f [%.4f, %.4f]\n", step, r.ratio, r.lower, r.upper);
  }

  // (a) False alarms on A/A series: the base runs in recorded order, 5 a
  // point (drift included), then 1000 series drawn from them.
  std::size_t in_order_points = base.size() / 5, in_order_found = 0;
  {
    Series s(in_order_points);
    for (std::size_t i = 0; i < in_order_points * 5; ++i) s[i / 5].push_back(base[i]);
    in_order_found = st::find_change_points(s).size();
  }
  std::printf("(a) A/A in recorded order: %zu points x 5, %zu change point(s)\n", in_order_points,
              in_order_found);
  std::size_t aa_found = 0;
  constexpr int kAASeries = 1000;
  for (int k = 0; k < kAASeries; ++k) aa_found += st::find_change_points(splice(base, base, 1, kPoints, 5, rng)).size();
  std::printf("(a) A/A drawn: %d series x %d points x 5: %zu change point(s), %.2f per 100 points\n",
              kAASeries, kPoints, aa_found, 100.0 * static_cast<double>(aa_found) / (kAASeries * kPoints));

  // (b) Power of the real steps at 3, 5 and 10 repetitions a point.
  constexpr int kSeries = 300;
  for (const char* step : {"step3", "step10"})
    for (int repeats : {3, 5, 10})
      std::printf("(b) %s at %2d repetitions: found within 2 points in %.1f %% of %d series\n", step,
                  repeats, 100 * power(base, pools[step], 1, repeats, kSeries, rng), kSeries);
  // The smallest step found in at least 90 % of series: the base runs scaled
  // (their real noise kept) by 1 + s.
  for (int repeats : {3, 5, 10}) {
    double smallest = NAN;
    for (double s = 0.005; s <= 0.30 + 1e-9; s += 0.005)
      if (power(base, base, 1 + s, repeats, 200, rng) >= 0.9) {
        smallest = s;
        break;
      }
    std::printf("(b) smallest step found in >= 90 %% of 200 series at %2d repetitions: %.1f %%\n",
                repeats, smallest * 100);
  }
  return 0;
}

int fill(const char* db, int configs, int commits, int repeats) {
  auto store = st::Store::open(db);
  const auto e = store.upsert_experiment("scale", "/bench/scale.toml", "scale");
  std::mt19937_64 rng(1);
  std::vector<std::int64_t> trials;
  for (int c = 0; c < configs; ++c)
    trials.push_back(store.upsert_trial(e, nlohmann::json{{"model", {{"hidden", c}}}}.dump(),
                                        "cfg" + std::to_string(c), "id" + std::to_string(c),
                                        "model.hidden=" + std::to_string(c)));
  int repeat = 0;
  for (int k = 0; k < commits; ++k)
    for (int r = 0; r < repeats; ++r, ++repeat)
      for (std::int64_t trial : trials) {
        st::RunStart start;
        start.trial_id = trial;
        start.repeat_index = repeat;
        start.labels = {{"commit", "c" + std::to_string(k)}};
        const auto run = store.begin_run(start);
        st::Summary s;
        s.metric = "step_time";
        s.unit = "ns";
        s.n = 100;
        // A 10 % step at two thirds of the commits, 2 % noise.
        const double level = k >= commits * 2 / 3 ? 1.1e6 : 1e6;
        s.p50 = s.mean = level * (1 + 0.02 * ((static_cast<double>(rng() >> 11) * 0x1.0p-53) - 0.5) * 3.46);
        store.finish_run(run, st::RunStatus::finished, "", {s}, {});
      }
  std::printf("%d runs\n", configs * commits * repeats);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "analyse" && argc == 3) return analyse(argv[2]);
  if (mode == "fill" && argc == 6) return fill(argv[2], std::stoi(argv[3]), std::stoi(argv[4]), std::stoi(argv[5]));
  std::cerr << "usage: runner-history-bench analyse VALUES | fill DB CONFIGS COMMITS REPEATS\n";
  return 2;
}
