// A portable synthetic workload for the statistics: per-run values shaped like
// real ones, and the error rates of the comparison rule over many seeded
// trials. Shared by tests/store/compare_test.cpp (which asserts the rates) and
// bench/power_curve.cpp (which prints the table in docs/method.md).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace runner::store::testing {

/// Draws from std::mt19937_64 (whose output the standard fixes) and makes its
/// own normals, because std::normal_distribution differs between standard
/// libraries: the simulation numbers are the same everywhere.
class Noise {
 public:
  /// A generator seeded with `seed`.
  explicit Noise(std::uint64_t seed) : rng_(seed) {}
  /// Uniform in (0, 1).
  double uniform();
  /// Standard normal (Box-Muller).
  double normal();

 private:
  std::mt19937_64 rng_;
};

/// A realistic shape of per-run values: each run's value is the median of its
/// step times. Step time = base * run factor * step noise, where the run
/// factor (lognormal, sigma run_sigma) is what differs between runs of the
/// same configuration (frequency, thread placement, memory layout), the step
/// noise is lognormal (sigma 8%), and 1% of steps are hit by a 3x spike
/// (interrupts, allocator). With run_sigma = 1.7% the run-to-run coefficient
/// of variation of the per-run medians is about 2% (checked in compare_test).
struct Workload {
  double base = 10e6;                 ///< 10 ms per step, in ns
  double run_sigma = 0.017;           ///< lognormal sigma of the run factor
  double step_sigma = 0.08;           ///< lognormal sigma of each step
  double spike_probability = 0.01;    ///< chance of a 3x step
  int steps = 100;                    ///< steps per run
  /// Probability that a whole run is disturbed (another job on the machine);
  /// 0 for the plain workload.
  double outlier_run_probability = 0;
  double outlier_run_slowdown = 1.08;  ///< how much slower a disturbed run is
};

/// `runs` per-run values (medians of the steps) of `w`, every step scaled by `scale`.
[[nodiscard]] std::vector<double> simulate_runs(Noise& noise, const Workload& w, int runs,
                                                double scale);

/// What `trials` comparisons concluded.
struct SimulationOutcome {
  int trials = 0;      ///< comparisons made
  int faster = 0;      ///< verdicts "faster"
  int slower = 0;      ///< verdicts "slower"
  double mean_cv = 0;  ///< mean run-to-run coefficient of variation of side A
  /// count / trials.
  [[nodiscard]] double rate(int count) const { return static_cast<double>(count) / trials; }
};

/// Compares side A (scale 1) with side B (scale `b_scale`) `trials` times, each
/// trial with its own data seed (seed_base + trial); the bootstrap keeps its
/// default seed, as `runner compare` does.
[[nodiscard]] SimulationOutcome simulate(const Workload& w, int runs_per_side, double b_scale,
                                         int trials, std::uint64_t seed_base);

}  // namespace runner::store::testing
