// How many runs a side `runner compare` needs to call a 1 %, 5 % and 20 %
// slowdown "slower" in at least 80 % of comparisons, at a measured run-to-run
// coefficient of variation: the table of docs/method.md "Runs needed at this
// machine's spread". bench/runs_needed.sh measures the spread of real
// workloads and passes it here.
//
// usage: runner-runs-needed NAME=CV [NAME=CV...]    (CV as a fraction: 0.012)
//
// Each CV is matched by the simulated workload of the statistics tests
// (store/testing: per-run medians of lognormal steps with a lognormal run
// factor): the run factor's sigma is found by bisection so that the mean
// coefficient of variation of 10-run samples is the measured one. Then, for
// each effect, the runs a side grow until 80 % of 200 seeded comparisons
// (compare_samples, the rule `runner compare` applies, default margin
// included) read "slower". Deterministic: every trial is seeded.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runner/store/simulation.hpp"

namespace {

using runner::store::testing::simulate;
using runner::store::testing::Workload;

constexpr int kTrials = 200;
constexpr double kPower = 0.8;

// The mean CV of 10-run samples of `w` over 200 seeded trials.
double mean_cv(const Workload& w) { return simulate(w, 10, 1.0, kTrials, 90000).mean_cv; }

// The workload whose runs vary by `cv`: bisection on the run factor's sigma.
// Below the spread the step noise alone gives, the run factor is 0.
Workload workload_with_cv(double cv) {
  Workload w;
  w.run_sigma = 0;
  if (mean_cv(w) >= cv) return w;
  double lo = 0, hi = 1;
  for (int i = 0; i < 30; ++i) {
    w.run_sigma = (lo + hi) / 2;
    (mean_cv(w) < cv ? lo : hi) = w.run_sigma;
  }
  w.run_sigma = (lo + hi) / 2;
  return w;
}

// The least runs a side (of a fixed ladder up to 200) that detect `effect`
// in kPower of the trials, or 0 when 200 do not.
int runs_needed(const Workload& w, double effect) {
  for (int n : {4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200}) {
    const auto outcome = simulate(w, n, effect, kTrials, 70000 + static_cast<std::uint64_t>(n));
    if (outcome.rate(outcome.slower) >= kPower) return n;
  }
  return 0;
}

std::string cell(int n) { return n == 0 ? "more than 200" : std::to_string(n); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: runner-runs-needed NAME=CV [NAME=CV...]  (CV as a fraction)\n");
    return 2;
  }
  std::printf("| workload | run-to-run CV | 1%% slower | 5%% slower | 20%% slower |\n"
              "| --- | ---: | ---: | ---: | ---: |\n");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    char* end = nullptr;
    const double cv = eq == std::string::npos ? NAN : std::strtod(arg.c_str() + eq + 1, &end);
    if (eq == std::string::npos || end == nullptr || *end != '\0' || !(cv > 0 && cv < 1)) {
      std::fprintf(stderr, "error: '%s' is not NAME=CV with 0 < CV < 1\n", arg.c_str());
      return 2;
    }
    const Workload w = workload_with_cv(cv);
    std::printf("| %s | %.1f%% | %s | %s | %s |\n", arg.substr(0, eq).c_str(), 100 * cv,
                cell(runs_needed(w, 1.01)).c_str(), cell(runs_needed(w, 1.05)).c_str(),
                cell(runs_needed(w, 1.20)).c_str());
    std::fflush(stdout);
  }
  return 0;
}
