// The power curve of `runner compare`'s verdict rule: by runs per side, the
// A/A false-alarm rate and how often a 5% and a 2% slowdown are detected, on
// the synthetic workload of the simulation tests; then the rule of thumb
// "about 30 x (CV / effect)^2 runs per side" checked where it predicts 30.
// Prints the table of docs/method.md "How many repetitions" (about 16,000
// comparisons; about 30 s on one core). Deterministic: every trial is seeded.
#include <cstdio>

#include "runner/store/simulation.hpp"

int main() {
  using runner::store::testing::simulate;
  using runner::store::testing::Workload;
  std::printf("| runs per side | A/A false alarms | 5%% slower: detected | wrong sign | "
              "2%% slower: detected | wrong sign |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int n : {3, 4, 5, 6, 8, 10, 15, 20}) {
    const auto aa = simulate(Workload{}, n, 1.0, 500, 30000);
    const auto five = simulate(Workload{}, n, 1.05, 500, 20000);
    const auto two = simulate(Workload{}, n, 1.02, 500, 40000);
    std::printf("| %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", n,
                100 * aa.rate(aa.faster + aa.slower), 100 * five.rate(five.slower),
                100 * five.rate(five.faster), 100 * two.rate(two.slower), 100 * two.rate(two.faster));
  }
  // Where the rule of thumb predicts 30 runs: a 2% effect at 2% CV, and a 5%
  // effect at 5% CV.
  Workload noisy;
  noisy.run_sigma = 0.048;
  std::printf("\n| runs per side | 2%% slower at CV 2%%: detected | 5%% slower at CV 5%%: detected "
              "| wrong sign |\n| ---: | ---: | ---: | ---: |\n");
  for (int n : {20, 25, 30}) {
    const auto two = simulate(Workload{}, n, 1.02, 300, 40000);
    const auto five = simulate(noisy, n, 1.05, 300, 50000);
    std::printf("| %d | %.1f%% (CV %.1f%%) | %.1f%% (CV %.1f%%) | %.1f%% |\n", n,
                100 * two.rate(two.slower), 100 * two.mean_cv, 100 * five.rate(five.slower),
                100 * five.mean_cv, 100 * (two.faster + five.faster) / 600.0);
  }
  return 0;
}
