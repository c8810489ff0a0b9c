// runner-bare-loop: the quickstart training workload as a bare LibTorch loop,
// with none of runner's bookkeeping (no plugins, phase marks, sample records,
// progress or database). It is the reference that runner's instrumentation
// overhead is measured against (bench/overhead.sh, docs/benchmarks.md).
//
// Same work as `runner run` on experiments/quickstart.toml: the data set is
// generated as the synthetic loader does (private CPU generator, randn inputs,
// labels = argmax of inputs @ a random teacher), the model is built after
// seeding the global generator (same initial weights), batches come from a
// seeded per-epoch shuffle (std::mt19937_64 + std::shuffle, drop_last) and an
// index_select, and the loss is read with item() after every step.
//
// Timing: every step is timed with std::chrono::steady_clock from before the
// batch is drawn to after optimizer.step(), and loss.item() is read after the
// step's clock stops, exactly where runner reads it. steps_per_s is measured
// steps / sum of measured step times (runner's samples_per_s / batch size).
// The whole loop (warm-up included, item() and everything between steps) is
// timed as well and reported as loop_ns_per_step.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "flags.hpp"

namespace {

struct Settings {
  std::int64_t steps = 2000;
  std::int64_t warmup = 20;
  int threads = 1;
  std::vector<std::int64_t> hidden{64, 64};
  std::int64_t batch = 32;
  std::int64_t features = 32;
  std::int64_t classes = 10;
  std::int64_t size = 4096;
  std::uint64_t seed = 0;
  double lr = 0.05;
  double momentum = 0.9;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: runner-bare-loop [--steps N] [--warmup N] [--threads N] [--hidden A,B,...]\n"
               "                        [--batch N] [--features N] [--classes N] [--size N]\n"
               "                        [--seed N] [--lr X] [--momentum X]\n"
               "Trains an MLP on synthetic data like `runner run experiments/quickstart.toml`,\n"
               "without runner's bookkeeping, and prints steps/s and the median step time.\n"
               "Defaults: 2000 steps, 20 warm-up, 1 thread, hidden 64,64, batch 32,\n"
               "32 features, 10 classes, 4096 samples, seed 0, lr 0.05, momentum 0.9\n"
               "(the quickstart's sizes; the quickstart itself measures 1000 steps).\n");
  std::exit(code);
}

std::int64_t to_int(std::string_view flag, const std::string& text, std::int64_t min) {
  return bench::flag_integer("runner-bare-loop", flag, text, min);
}

double to_double(std::string_view flag, const std::string& text) {
  return bench::flag_number("runner-bare-loop", flag, text, 0);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") usage(0);
    if (i + 1 >= argc) usage(2);
    const std::string value = argv[++i];
    if (flag == "--steps") {
      s.steps = to_int(flag, value, 1);
    } else if (flag == "--warmup") {
      s.warmup = to_int(flag, value, 0);
    } else if (flag == "--threads") {
      s.threads = static_cast<int>(to_int(flag, value, 1));
    } else if (flag == "--hidden") {
      s.hidden.clear();
      std::size_t start = 0;
      while (start <= value.size()) {
        const std::size_t comma = std::min(value.find(',', start), value.size());
        s.hidden.push_back(to_int(flag, value.substr(start, comma - start), 1));
        start = comma + 1;
      }
    } else if (flag == "--batch") {
      s.batch = to_int(flag, value, 1);
    } else if (flag == "--features") {
      s.features = to_int(flag, value, 1);
    } else if (flag == "--classes") {
      s.classes = to_int(flag, value, 2);
    } else if (flag == "--size") {
      s.size = to_int(flag, value, 1);
    } else if (flag == "--seed") {
      s.seed = static_cast<std::uint64_t>(to_int(flag, value, 0));
    } else if (flag == "--lr") {
      s.lr = to_double(flag, value);
    } else if (flag == "--momentum") {
      s.momentum = to_double(flag, value);
    } else {
      std::fprintf(stderr, "runner-bare-loop: unknown option '%.*s'\n",
                   static_cast<int>(flag.size()), flag.data());
      usage(2);
    }
  }
  if (s.size < s.batch) {
    std::fprintf(stderr, "runner-bare-loop: --size must be >= --batch\n");
    std::exit(2);
  }
  return s;
}

// Percentile q in [0, 1], linear between closest ranks (NumPy's default, as runner).
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  at::set_num_threads(s.threads);
  torch::manual_seed(s.seed);

  // The data set, as the synthetic loader makes it (data_seed 0: seed ^ 0).
  auto generator = at::make_generator<at::CPUGeneratorImpl>(s.seed);
  const torch::Tensor inputs = at::randn({s.size, s.features}, generator, torch::kFloat32);
  const torch::Tensor teacher = at::randn({s.features, s.classes}, generator, torch::kFloat32);
  const torch::Tensor targets = inputs.matmul(teacher).argmax(1);

  torch::nn::Sequential net;
  std::int64_t width = s.features;
  for (const std::int64_t h : s.hidden) {
    net->push_back(torch::nn::Linear(width, h));
    net->push_back(torch::nn::ReLU());
    width = h;
  }
  net->push_back(torch::nn::Linear(width, s.classes));
  net->train();
  torch::optim::SGD optimizer(net->parameters(),
                              torch::optim::SGDOptions(s.lr).momentum(s.momentum));

  // Seeded shuffle per epoch; the last partial batch is dropped.
  std::mt19937_64 shuffler(s.seed);
  std::vector<std::int64_t> order(static_cast<std::size_t>(s.size));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), shuffler);
  const auto batch = static_cast<std::size_t>(s.batch);
  std::size_t position = 0;

  using Clock = std::chrono::steady_clock;
  const std::int64_t total = s.warmup + s.steps;
  std::vector<double> step_ns;
  step_ns.reserve(static_cast<std::size_t>(s.steps));
  double first_loss = 0, last_loss = 0, checksum = 0;
  const auto loop_start = Clock::now();
  for (std::int64_t step = 0; step < total; ++step) {
    const auto start = Clock::now();
    if (order.size() - position < batch) {
      std::shuffle(order.begin(), order.end(), shuffler);
      position = 0;
    }
    const std::vector<std::int64_t> indices(
        order.begin() + static_cast<std::ptrdiff_t>(position),
        order.begin() + static_cast<std::ptrdiff_t>(position + batch));
    position += batch;
    const torch::Tensor idx = torch::tensor(indices, torch::kLong);
    const torch::Tensor x = inputs.index_select(0, idx);
    const torch::Tensor y = targets.index_select(0, idx);
    const torch::Tensor output = net->forward(x);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(output, y);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    const auto end = Clock::now();
    const double value = loss.detach().item<double>();
    if (step == 0) first_loss = value;
    last_loss = value;
    checksum += value;
    if (step >= s.warmup)
      step_ns.push_back(
          static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()));
  }
  const double loop_ns = static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - loop_start).count());

  const double sum_ns = std::accumulate(step_ns.begin(), step_ns.end(), 0.0);
  const double steps_per_s = static_cast<double>(step_ns.size()) / (sum_ns * 1e-9);
  std::printf("threads=%d hidden=", at::get_num_threads());
  for (std::size_t i = 0; i < s.hidden.size(); ++i)
    std::printf("%s%lld", i ? "," : "", static_cast<long long>(s.hidden[i]));
  std::printf(" batch=%lld features=%lld warmup=%lld steps=%lld\n",
              static_cast<long long>(s.batch), static_cast<long long>(s.features),
              static_cast<long long>(s.warmup), static_cast<long long>(s.steps));
  std::printf("steps_per_s=%.3f\n", steps_per_s);
  std::printf("samples_per_s=%.3f\n", steps_per_s * static_cast<double>(s.batch));
  std::printf("median_step_ns=%.0f\n", percentile(step_ns, 0.5));
  std::printf("p10_step_ns=%.0f\n", percentile(step_ns, 0.1));
  std::printf("min_step_ns=%.0f\n", percentile(step_ns, 0.0));
  std::printf("mean_step_ns=%.0f\n", sum_ns / static_cast<double>(step_ns.size()));
  std::printf("loop_ns_per_step=%.0f\n", loop_ns / static_cast<double>(total));
  std::printf("loss_first=%.6f loss_last=%.6f loss_mean=%.6f\n", first_loss, last_loss,
              checksum / static_cast<double>(total));
  return 0;
}
