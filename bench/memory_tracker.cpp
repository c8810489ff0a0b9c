// runner-memory-tracker: what the CPU memory tracker costs, and what
// activation checkpointing trades (docs/memory.md).
//
// Overhead: the same work without and with the tracker, each in a fresh
// child process (the tracker wraps the allocator for good once installed, and
// must be installed before the process's first tensor), alternating for
// --rounds rounds; the ratio with/without is taken per round and its median
// printed. Two workloads: an allocation-heavy loop (--ops element-wise
// additions of two 16-float tensors, one 64-byte allocation and free each)
// and a real training step (the convnet plugin's forward and backward on a
// batch of 32 3x32x32 images, --steps steps).
//
// Trade: transformer_lm (gpt2 flavour, --width, --depth 8 blocks, 4 heads,
// sequences of --seq tokens, a batch of --batch, vocabulary 256) trained
// with checkpoint = none, every_k (k = 2) and blocks, each in a child with
// the tracker: median step time and the step's peak CPU bytes above what was
// live before it.
//
// One thread (--threads) unless told otherwise, as the benchmarks in
// docs/benchmarks.md.
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <runner/sdk.hpp>

#include "flags.hpp"
#include "runner/host/host.hpp"
#include "runner/training/memory.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace mem = runner::training::cpu_memory;
namespace fs = std::filesystem;

constexpr const char* kProgram = "runner-memory-tracker";

struct Settings {
  std::int64_t ops = 100000;
  std::int64_t steps = 30;
  int rounds = 5;
  int threads = 1;
  std::int64_t width = 128;
  std::int64_t seq = 128;
  std::int64_t batch = 16;
  std::int64_t trade_steps = 8;
  bool overhead = true;
  bool trade = true;
  fs::path plugins;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: %s [--ops N] [--steps N] [--rounds N] [--threads N] [--width N] "
               "[--seq N] [--batch N] [--trade-steps N] [--only overhead|trade] "
               "[--plugins DIR]\n",
               kProgram);
  std::exit(code);
}

Settings parse(int argc, char** argv) {
  Settings s;
  s.plugins = fs::path(argv[0]).parent_path().parent_path() / "lib" / "runner" / "plugins";
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") usage(0);
    if (i + 1 >= argc) usage(2);
    const std::string value = argv[++i];
    if (flag == "--ops") s.ops = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--steps") s.steps = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--rounds") s.rounds = static_cast<int>(bench::flag_integer(kProgram, flag, value, 1));
    else if (flag == "--threads") s.threads = static_cast<int>(bench::flag_integer(kProgram, flag, value, 1));
    else if (flag == "--width") s.width = bench::flag_integer(kProgram, flag, value, 4);
    else if (flag == "--seq") s.seq = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--batch") s.batch = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--trade-steps") s.trade_steps = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--plugins") s.plugins = value;
    else if (flag == "--only" && (value == "overhead" || value == "trade")) {
      s.overhead = value == "overhead";
      s.trade = value == "trade";
    } else {
      usage(2);
    }
  }
  return s;
}

/// What a child reports back through its pipe.
struct Report {
  double seconds = 0;          // per op or per step (median), wall clock
  double cpu_seconds = 0;      // the same in process CPU time (less sensitive to other load)
  std::int64_t peak_bytes = 0;  // trade: the largest step peak above the step's start
  bool ok = false;
};

/// Runs `work` in a fresh child process and returns its report.
Report in_child(const std::function<Report()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("pipe");
    std::exit(1);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    ::close(fds[0]);
    Report report;
    try {
      report = work();
      report.ok = true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    }
    const ssize_t written = ::write(fds[1], &report, sizeof report);
    ::_exit(written == static_cast<ssize_t>(sizeof report) ? 0 : 1);
  }
  ::close(fds[1]);
  Report report;
  const ssize_t got = ::read(fds[0], &report, sizeof report);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof report) || !report.ok || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s: a measurement failed\n", kProgram);
    std::exit(1);
  }
  return report;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double cpu_now() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

Report allocation_loop(const Settings& s, bool tracked) {
  if (tracked) mem::install();
  at::set_num_threads(s.threads);
  const torch::Tensor a = torch::ones({16}), b = torch::full({16}, 2.0f);
  torch::Tensor c;
  for (int i = 0; i < 1000; ++i) c = a + b;
  const auto start = Clock::now();
  const double cpu_start = cpu_now();
  for (std::int64_t i = 0; i < s.ops; ++i) c = a + b;
  Report r;
  r.cpu_seconds = (cpu_now() - cpu_start) / static_cast<double>(s.ops);
  r.seconds = seconds_since(start) / static_cast<double>(s.ops);
  return r;
}

std::unique_ptr<runner::Model> make_model(runner::PluginHost& host, const std::string& plugin,
                                          const runner::Options& options,
                                          const runner::ModelContext& context) {
  torch::manual_seed(0);
  return host.make_model(plugin, options, context);
}

/// Median time of a forward and backward step; peak bytes above each step's start.
Report train_steps(runner::Model& model, std::int64_t batch_size, std::int64_t steps) {
  torch::nn::Module& module = model.module();
  module.train();
  torch::manual_seed(1);
  const runner::Batch batch = model.example_batch(batch_size, torch::kCPU);
  std::vector<double> times, cpu_times;
  Report r;
  for (std::int64_t step = -3; step < steps; ++step) {
    module.zero_grad(/*set_to_none=*/false);
    const std::int64_t before = mem::current_bytes();
    mem::reset_peak();
    const auto start = Clock::now();
    const double cpu_start = cpu_now();
    model.loss(model.forward(batch), batch).backward();
    if (step < 0) continue;  // warm-up: first allocations, oneDNN primitive creation
    times.push_back(seconds_since(start));
    cpu_times.push_back(cpu_now() - cpu_start);
    r.peak_bytes = std::max(r.peak_bytes, mem::peak_bytes() - before);
  }
  r.seconds = median(times);
  r.cpu_seconds = median(cpu_times);
  return r;
}

Report convnet_step(const Settings& s, bool tracked) {
  if (tracked) mem::install();
  at::set_num_threads(s.threads);
  runner::PluginHost host;
  host.load(s.plugins);
  runner::ModelContext context;
  context.input_shape = {3, 32, 32};
  context.num_classes = 10;
  auto model = make_model(host, "convnet", runner::Options(), context);
  return train_steps(*model, 32, s.steps);
}

Report lm_step(const Settings& s, const std::string& mode) {
  mem::install();
  at::set_num_threads(s.threads);
  runner::PluginHost host;
  host.load(s.plugins);
  runner::ModelContext context;
  context.input_shape = {s.seq};
  context.num_classes = 256;
  const runner::Options options({{"flavour", std::string("gpt2")},
                                 {"width", s.width},
                                 {"depth", std::int64_t{8}},
                                 {"heads", std::int64_t{4}},
                                 {"checkpoint", mode},
                                 {"checkpoint_every", std::int64_t{2}}});
  auto model = make_model(host, "transformer_lm", options, context);
  return train_steps(*model, s.batch, s.trade_steps);
}

/// Medians over rounds of the figures of `a` and `b` and of their per-round ratios.
struct Pair {
  std::vector<double> a, b, ratio, cpu_a, cpu_b, cpu_ratio;
  void add(const Report& x, const Report& y) {
    a.push_back(x.seconds);
    b.push_back(y.seconds);
    ratio.push_back(y.seconds / x.seconds);
    cpu_a.push_back(x.cpu_seconds);
    cpu_b.push_back(y.cpu_seconds);
    cpu_ratio.push_back(y.cpu_seconds / x.cpu_seconds);
  }
  void print(const std::string& what, double unit, const char* unit_name) const {
    std::printf("  %-40s wall %9.2f %s %9.2f %s %7.3f (%.3f-%.3f) | cpu %9.2f %s %9.2f %s %7.3f\n",
                what.c_str(), unit * median(a), unit_name, unit * median(b), unit_name,
                median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()), unit * median(cpu_a), unit_name,
                unit * median(cpu_b), unit_name, median(cpu_ratio));
  }
};

void overhead(const Settings& s) {
  std::printf("tracker overhead, %d round(s), %d thread(s): without, with, with/without (median "
              "of the rounds' ratios, range); each run a fresh process\n",
              s.rounds, s.threads);
  Pair loop, step;
  for (int round = 0; round < s.rounds; ++round) {
    const Report off = in_child([&] { return allocation_loop(s, false); });
    const Report on = in_child([&] { return allocation_loop(s, true); });
    loop.add(off, on);
    const Report step0 = in_child([&] { return convnet_step(s, false); });
    const Report step1 = in_child([&] { return convnet_step(s, true); });
    step.add(step0, step1);
  }
  loop.print("a + b on 16 floats, " + std::to_string(s.ops) + " ops", 1e9, "ns");
  step.print("convnet fwd+bwd, batch 32, " + std::to_string(s.steps) + " steps", 1e3, "ms");
}

void trade(const Settings& s) {
  std::printf("checkpointing trade: transformer_lm gpt2, width %lld, 8 blocks, seq %lld, batch "
              "%lld, vocab 256, %d thread(s), %lld steps per run, %d round(s)\n",
              static_cast<long long>(s.width), static_cast<long long>(s.seq),
              static_cast<long long>(s.batch), s.threads, static_cast<long long>(s.trade_steps),
              s.rounds);
  const std::vector<std::string> modes{"none", "every_k", "blocks"};
  std::map<std::string, Pair> vs_none;
  std::map<std::string, std::int64_t> peak;
  for (int round = 0; round < s.rounds; ++round) {
    std::map<std::string, Report> reports;
    for (const std::string& mode : modes) {
      reports[mode] = in_child([&] { return lm_step(s, mode); });
      peak[mode] = reports[mode].peak_bytes;
    }
    for (const std::string& mode : modes) vs_none[mode].add(reports["none"], reports[mode]);
  }
  std::printf("  step time: none, this mode, ratio (median of rounds, range) | the same in CPU "
              "time\n");
  for (const std::string& mode : modes)
    vs_none[mode].print(mode == "every_k" ? "every_k=2" : mode, 1e3, "ms");
  std::printf("  step peak above the step's start (tracker):");
  for (const std::string& mode : modes)
    std::printf(" %s %.1f MB (%.3f)", mode == "every_k" ? "every_k=2" : mode.c_str(),
                static_cast<double>(peak[mode]) / 1e6,
                static_cast<double>(peak[mode]) / static_cast<double>(peak["none"]));
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  if (s.overhead) overhead(s);
  if (s.trade) trade(s);
  return 0;
}
