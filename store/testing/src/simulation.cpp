// The synthetic workload of the statistics' simulations (see simulation.hpp).
#include "runner/store/simulation.hpp"

#include <cmath>
#include <numbers>

#include "runner/store/statistics.hpp"

namespace runner::store::testing {

double Noise::uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; }

double Noise::normal() {
  const double u1 = uniform(), u2 = uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

std::vector<double> simulate_runs(Noise& noise, const Workload& w, int runs, double scale) {
  std::vector<double> values;
  std::vector<double> steps(static_cast<std::size_t>(w.steps));
  for (int r = 0; r < runs; ++r) {
    double run_factor = std::exp(w.run_sigma * noise.normal());
    if (noise.uniform() < w.outlier_run_probability) run_factor *= w.outlier_run_slowdown;
    for (double& s : steps) {
      s = w.base * scale * run_factor * std::exp(w.step_sigma * noise.normal());
      if (noise.uniform() < w.spike_probability) s *= 3;
    }
    values.push_back(median(steps));
  }
  return values;
}

SimulationOutcome simulate(const Workload& w, int runs_per_side, double b_scale, int trials,
                           std::uint64_t seed_base) {
  SimulationOutcome out;
  out.trials = trials;
  double cv_sum = 0;
  for (int t = 0; t < trials; ++t) {
    Noise noise(seed_base + static_cast<std::uint64_t>(t));
    const auto a = simulate_runs(noise, w, runs_per_side, 1.0);
    const auto b = simulate_runs(noise, w, runs_per_side, b_scale);
    const Comparison c = compare_samples(a, b, Direction::lower_is_better);
    if (c.verdict == Verdict::faster) ++out.faster;
    if (c.verdict == Verdict::slower) ++out.slower;
    cv_sum += coefficient_of_variation(a).value_or(0);
  }
  out.mean_cv = cv_sum / trials;
  return out;
}

}  // namespace runner::store::testing
