// runner-bookkeeping: what runner's per-step bookkeeping costs, measured
// directly rather than as the difference of two noisy training runs.
//
// It drives the real step loop, runner::run_steps, with a runner::CpuPhaseClock
// and a body that does no model work: it marks the phases a training step
// marks (data, forward, backward, optimizer) and returns a 0-dim float tensor
// made once before the loop. So every step pays exactly what runner adds
// around a step's work: the stop check, begin_step / end_step, the four phase
// marks, the std::function call, loss.item(), the sample record and the
// progress check. The same std::function body is also called in a plain loop
// without run_steps; raw minus that loop is run_steps' own share (net).
//
// After the run, out of the step path, runner summarises the samples and
// writes them to SQLite in one transaction; those are timed per sample too.
// With --step-us, or else from the bare LibTorch loop run with the quickstart
// sizes, the cost is also printed as a percentage of a quickstart step.
// Figures and how to read them: docs/benchmarks.md.
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "flags.hpp"
#include "runner/engine/engine.hpp"
#include "runner/engine/phase_clock.hpp"
#include "runner/engine/step_loop.hpp"
#include "runner/store/statistics.hpp"
#include "runner/store/store.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Body = std::function<torch::Tensor(std::int64_t)>;

struct Settings {
  std::int64_t steps = 200000;
  std::int64_t warmup = 0;
  int reps = 7;
  double step_us = 0;  // 0: ask the bare loop
  std::string bare;    // empty: runner-bare-loop next to this program
  bool run_bare = true;
  std::int64_t store_samples = 1020;  // the quickstart's samples per run
  int store_reps = 7;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: runner-bookkeeping [--steps N] [--warmup N] [--reps N] [--step-us X]\n"
               "                          [--bare PATH | --no-bare] [--store-samples N] [--store-reps N]\n"
               "Times runner's per-step bookkeeping (runner::run_steps with a phase clock and\n"
               "an empty step body), ns per step, best and median of --reps repetitions.\n"
               "The quickstart step it is compared with: --step-us, or else the median step of\n"
               "runner-bare-loop (next to this program, or --bare) with the quickstart sizes.\n"
               "Then times, per sample, the summaries and the SQLite write runner does after\n"
               "the run (--store-samples 0: skip). Defaults: 200000 steps, 0 warm-up, 7 reps,\n"
               "1020 samples per store write (the quickstart's), 7 store reps.\n");
  std::exit(code);
}

double to_number(std::string_view flag, const std::string& text, double min) {
  return bench::flag_number("runner-bookkeeping", flag, text, min);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") usage(0);
    if (flag == "--no-bare") {
      s.run_bare = false;
      continue;
    }
    if (i + 1 >= argc) usage(2);
    const std::string value = argv[++i];
    if (flag == "--steps") {
      s.steps = static_cast<std::int64_t>(to_number(flag, value, 1));
    } else if (flag == "--warmup") {
      s.warmup = static_cast<std::int64_t>(to_number(flag, value, 0));
    } else if (flag == "--reps") {
      s.reps = static_cast<int>(to_number(flag, value, 1));
    } else if (flag == "--step-us") {
      s.step_us = to_number(flag, value, 0);
    } else if (flag == "--bare") {
      s.bare = value;
    } else if (flag == "--store-samples") {
      s.store_samples = static_cast<std::int64_t>(to_number(flag, value, 0));
    } else if (flag == "--store-reps") {
      s.store_reps = static_cast<int>(to_number(flag, value, 1));
    } else {
      std::fprintf(stderr, "runner-bookkeeping: unknown option '%.*s'\n",
                   static_cast<int>(flag.size()), flag.data());
      usage(2);
    }
  }
  return s;
}

double ns_since(Clock::time_point start) {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Kept out of line so that the calls go through std::function as in run_steps.
[[gnu::noinline]] double time_plain_loop(const Body& body, std::int64_t steps) {
  const auto start = Clock::now();
  for (std::int64_t step = 0; step < steps; ++step) {
    const torch::Tensor loss = body(step);
  }
  return ns_since(start) / static_cast<double>(steps);
}

// ns per call of `op`, which returns a tensor (destroyed at once, as in a step).
template <class Op>
[[gnu::noinline]] double time_op(const Op& op, std::int64_t calls) {
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < calls; ++i) {
    const torch::Tensor t = op();
  }
  return ns_since(start) / static_cast<double>(calls);
}

// ns per step of run_steps around `body`, everything the loop does included
// (the reserve of the sample buffer and the metrics after the loop too).
double time_run_steps(const Settings& s, runner::PhaseClock& clock, const Body& body,
                      const std::atomic<bool>& stop, runner::RunOutcome& out) {
  runner::RunRequest request;  // experiment and host are not used by run_steps
  request.stop = &stop;
  // The CLI always installs a progress callback; the loop checks it every step.
  std::int64_t progress_calls = 0;
  request.on_progress = [&progress_calls](const runner::Progress&) { ++progress_calls; };
  out = runner::RunOutcome{};
  const auto start = Clock::now();
  runner::run_steps(request, clock, s.warmup, s.steps, body, out);
  const double ns = ns_since(start) / static_cast<double>(s.warmup + s.steps);
  if (out.samples.size() != static_cast<std::size_t>(s.warmup + s.steps) || progress_calls < 1) {
    std::fprintf(stderr, "runner-bookkeeping: run_steps recorded %zu samples for %lld steps\n",
                 out.samples.size(), static_cast<long long>(s.warmup + s.steps));
    std::exit(1);
  }
  return ns;
}

// Median step of the bare LibTorch loop with the quickstart's sizes, ns; 0 if unavailable.
double bare_quickstart_step_ns(const Settings& s) {
  std::filesystem::path exe = s.bare;
  if (exe.empty()) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return 0;
    exe = self.parent_path() / "runner-bare-loop";
  }
  if (::access(exe.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "runner-bookkeeping: %s not found; pass --step-us or --bare\n",
                 exe.c_str());
    return 0;
  }
  const std::string command = "'" + exe.string() +
                              "' --hidden 64,64 --batch 32 --features 32 --threads 1"
                              " --steps 3000 --warmup 50";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return 0;
  double median_ns = 0;
  char line[256];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    const std::string_view text(line);
    if (text.starts_with("median_step_ns=")) median_ns = std::atof(line + 15);
  }
  const int status = ::pclose(pipe);
  return status == 0 ? median_ns : 0;
}

// After the run: the summaries the engine computes (wall, and each phase that
// was timed: the four the loop marks).
double time_summaries(const std::vector<runner::store::Sample>& samples) {
  const auto start = Clock::now();
  std::vector<double> wall;
  std::array<std::vector<double>, runner::store::kPhaseCount> phases;
  for (const auto& x : samples) {
    if (x.warmup) continue;
    wall.push_back(x.wall_ns);
    for (std::size_t p = 0; p < runner::store::kPhaseCount; ++p)
      if (x.phase_ns[p] >= 0) phases[p].push_back(x.phase_ns[p]);
  }
  std::vector<runner::store::Summary> out;
  out.push_back(runner::store::summarize("step_time", "ns", std::move(wall)));
  for (const auto& phase : runner::store::kPhases) {
    auto& values = phases[runner::store::phase_index(phase.phase)];
    if (!values.empty())
      out.push_back(runner::store::summarize(phase.name, "ns", std::move(values)));
  }
  const double ns = ns_since(start);
  if (out.front().n == 0) std::exit(1);
  return ns / static_cast<double>(samples.size());
}

// After the run: Store::add_samples of `samples` into a fresh run, ns per sample,
// one result per repetition. The database is a temporary file, removed after.
std::vector<double> time_store_writes(const std::vector<runner::store::Sample>& samples, int reps) {
  namespace fs = std::filesystem;
  const fs::path path =
      fs::temp_directory_path() / ("runner-bookkeeping-" + std::to_string(::getpid()) + ".db");
  std::vector<double> per_sample;
  {
    auto db = runner::store::Store::open(path);
    const auto experiment = db.upsert_experiment("bookkeeping", "bookkeeping.toml", "");
    const auto trial = db.upsert_trial(experiment, "{}", "config", "identity", "");
    const auto fingerprint = db.upsert_fingerprint("fingerprint", "{}");
    for (int r = 0; r < reps; ++r) {
      runner::store::RunStart run;
      run.trial_id = trial;
      run.fingerprint_id = fingerprint;
      run.repeat_index = r;
      run.kind = runner::RunKind::train;
      const auto run_id = db.begin_run(run);
      const auto start = Clock::now();
      db.add_samples(run_id, samples);
      per_sample.push_back(ns_since(start) / static_cast<double>(samples.size()));
    }
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    fs::remove(fs::path(path.string() + suffix), ec);
  }
  return per_sample;
}

std::string loadavg() {
  std::string text = "?";
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    char buf[128];
    if (std::fgets(buf, sizeof buf, f) != nullptr) text = buf;
    std::fclose(f);
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

void print_row(const char* what, const std::vector<double>& ns) {
  std::printf("  %-56s best %7.1f   median %7.1f   [max %7.1f]\n", what, best(ns), median(ns),
              *std::max_element(ns.begin(), ns.end()));
}

int run(const Settings& s) {
  at::set_num_threads(1);

  runner::CpuPhaseClock clock;
  const torch::Tensor loss = torch::full({}, 0.5f, torch::kFloat32);  // made once: no allocation per step
  const Body marking_body = [&clock, &loss](std::int64_t) {
    clock.end_phase(runner::Phase::data);
    clock.end_phase(runner::Phase::forward);
    clock.end_phase(runner::Phase::backward);
    clock.end_phase(runner::Phase::optimizer);
    return loss;
  };
  const Body bare_body = [&loss](std::int64_t) { return loss; };
  const std::atomic<bool> stop{false};

  std::printf("load: %s\n", loadavg().c_str());
  std::printf("steps=%lld warmup=%lld reps=%d (ns per step; the three loops alternate in each rep)\n",
              static_cast<long long>(s.steps), static_cast<long long>(s.warmup), s.reps);

  std::vector<double> raw, marks, call;
  runner::RunOutcome out;
  for (int r = 0; r < s.reps; ++r) {
    for (int k = 0; k < 3; ++k) {
      switch ((r + k) % 3) {
        case 0: raw.push_back(time_run_steps(s, clock, marking_body, stop, out)); break;
        case 1: marks.push_back(time_plain_loop(marking_body, s.warmup + s.steps)); break;
        default: call.push_back(time_plain_loop(bare_body, s.warmup + s.steps)); break;
      }
    }
  }
  // Two operators of runner's step that the bare loop does not time: the
  // detach of the loss inside the step (the bare loop detaches after its
  // clock stops) and the mlp plugin's reshape of the batch. They are the
  // step's work, not bookkeeping, but they are in runner's step time.
  std::vector<double> detach, reshape;
  {
    const torch::Tensor graph_loss = torch::full({}, 0.5f, torch::requires_grad());
    const torch::Tensor inputs = torch::zeros({32, 32});  // a quickstart batch
    for (int r = 0; r < s.reps; ++r) {
      detach.push_back(time_op([&] { return graph_loss.detach(); }, s.steps));
      reshape.push_back(time_op([&] { return inputs.reshape({inputs.size(0), 32}); }, s.steps));
    }
  }

  std::vector<double> net(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) net[i] = raw[i] - marks[i];
  print_row("raw: run_steps + phase marks, per step", raw);
  print_row("plain loop calling the same body (4 marks)", marks);
  print_row("plain loop calling a body without marks", call);
  std::printf("  %-56s best %7.1f   median %7.1f\n", "net: raw - plain loop with marks",
              best(raw) - best(marks), median(net));
  std::printf("  %-56s best %7.1f   median %7.1f\n", "bookkeeping: raw - plain loop without marks",
              best(raw) - best(call), median(raw) - median(call));
  print_row("(aside, not bookkeeping) loss.detach()", detach);
  print_row("(aside, not bookkeeping) mlp's batch reshape", reshape);

  double step_ns = s.step_us * 1000.0;
  const char* source = "--step-us";
  if (step_ns <= 0 && s.run_bare) {
    step_ns = bare_quickstart_step_ns(s);
    source = "runner-bare-loop median, 64,64 batch 32 features 32, 3000 steps";
  }
  if (step_ns > 0) {
    std::printf("quickstart step: %.1f us (%s)\n", step_ns / 1000.0, source);
    std::printf("  bookkeeping (raw) as %% of that step: best %.3f %%   median %.3f %%\n",
                100.0 * best(raw) / step_ns, 100.0 * median(raw) / step_ns);
    std::printf("  bookkeeping (net) as %% of that step: best %.3f %%   median %.3f %%\n",
                100.0 * (best(raw) - best(marks)) / step_ns, 100.0 * median(net) / step_ns);
  }

  if (s.store_samples > 0) {
    // Samples as the loop recorded them, cycled up to the requested count.
    std::vector<runner::store::Sample> samples;
    samples.reserve(static_cast<std::size_t>(s.store_samples));
    for (std::int64_t i = 0; i < s.store_samples; ++i) {
      runner::store::Sample x = out.samples[static_cast<std::size_t>(i) % out.samples.size()];
      x.step = i;
      x.warmup = i < 20;  // the quickstart's warm-up steps
      samples.push_back(x);
    }
    std::vector<double> summaries;
    for (int r = 0; r < s.store_reps; ++r) summaries.push_back(time_summaries(samples));
    const std::vector<double> writes = time_store_writes(samples, s.store_reps);
    std::printf("after the run (ns per sample, %lld samples, %d reps; SQLite: one transaction):\n",
                static_cast<long long>(s.store_samples), s.store_reps);
    print_row("summaries (step_time + 4 phases)", summaries);
    print_row("store write per sample, after the run, off the step path", writes);
  }
  std::printf("load: %s\n", loadavg().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  try {
    return run(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runner-bookkeeping: %s\n", e.what());
    return 1;
  }
}
