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
#include "runner/recipes/memory.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace mem = runner::recipes::cpu_memory;
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
  double seconds = 0;          // per op or per step (median)
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

Report allocation_loop(const Settings& s, bool tracked) {
  if (tracked) mem::install();
  at::set_num_threads(s.threads);
  const torch::Tensor a = torch::ones({16}), b = torch::full({16}, 2.0f);
  torch::Tensor c;
  for (int i = 0; i < 1000; ++i) c = a + b;
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < s.ops; ++i) c = a + b;
  Report r;
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
  std::vector<double> times;
  Report r;
  for (std::int64_t step = -3; step < steps; ++step) {
    module.zero_grad(/*set_to_none=*/false);
    const std::int64_t before = mem::current_bytes();
    mem::reset_peak();
    const auto start = Clock::now();
    model.loss(model.forward(batch), batch).backward();
    if (step < 0) continue;  // warm-up: first allocations, oneDNN primitive creation
    times.push_back(seconds_since(start));
    r.peak_bytes = std::max(r.peak_bytes, mem::peak_bytes() - before);
  }
  r.seconds = median(times);
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

void overhead(const Settings& s) {
  std::printf("tracker overhead, %d round(s), %d thread(s); each figure a median, each run a "
              "fresh process\n",
              s.rounds, s.threads);
  std::vector<double> loop_off, loop_on, loop_ratio, step_off, step_on, step_ratio;
  for (int round = 0; round < s.rounds; ++round) {
    const double off = in_child([&] { return allocation_loop(s, false); }).seconds;
    const double on = in_child([&] { return allocation_loop(s, true); }).seconds;
    loop_off.push_back(off);
    loop_on.push_back(on);
    loop_ratio.push_back(on / off);
    const double step0 = in_child([&] { return convnet_step(s, false); }).seconds;
    const double step1 = in_child([&] { return convnet_step(s, true); }).seconds;
    step_off.push_back(step0);
    step_on.push_back(step1);
    step_ratio.push_back(step1 / step0);
  }
  std::printf("  %-44s %12s %12s %8s\n", "workload", "without", "with", "ratio");
  std::printf("  %-44s %9.1f ns %9.1f ns %8.3f\n",
              ("a + b on 16 floats, " + std::to_string(s.ops) + " ops").c_str(),
              1e9 * median(loop_off), 1e9 * median(loop_on), median(loop_ratio));
  std::printf("  %-44s %9.2f ms %9.2f ms %8.3f\n",
              ("convnet forward+backward, batch 32, " + std::to_string(s.steps) + " steps").c_str(),
              1e3 * median(step_off), 1e3 * median(step_on), median(step_ratio));
  std::printf("  ratio range over rounds: loop %.3f-%.3f, step %.3f-%.3f\n",
              *std::min_element(loop_ratio.begin(), loop_ratio.end()),
              *std::max_element(loop_ratio.begin(), loop_ratio.end()),
              *std::min_element(step_ratio.begin(), step_ratio.end()),
              *std::max_element(step_ratio.begin(), step_ratio.end()));
}

void trade(const Settings& s) {
  std::printf("checkpointing trade: transformer_lm gpt2, width %lld, 8 blocks, seq %lld, batch "
              "%lld, vocab 256, %d thread(s), %lld steps\n",
              static_cast<long long>(s.width), static_cast<long long>(s.seq),
              static_cast<long long>(s.batch), s.threads, static_cast<long long>(s.trade_steps));
  std::printf("  %-10s %14s %10s %16s %10s\n", "checkpoint", "step (median)", "vs none",
              "step peak", "vs none");
  std::map<std::string, Report> reports;
  for (const std::string mode : {"none", "every_k", "blocks"})
    reports[mode] = in_child([&] { return lm_step(s, mode); });
  const Report& none = reports["none"];
  for (const std::string mode : {"none", "every_k", "blocks"}) {
    const Report& r = reports[mode];
    std::printf("  %-10s %11.1f ms %10.3f %13.1f MB %10.3f\n",
                (mode == "every_k" ? std::string("every_k=2") : mode).c_str(), 1e3 * r.seconds,
                r.seconds / none.seconds, static_cast<double>(r.peak_bytes) / 1e6,
                static_cast<double>(r.peak_bytes) / static_cast<double>(none.peak_bytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  if (s.overhead) overhead(s);
  if (s.trade) trade(s);
  return 0;
}
