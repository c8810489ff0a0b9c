// runner-optim-impl: steps/s of an optimizer plugin's impls (loop, foreach,
// fused) on parameter sets shaped like real models, as ratios measured in one
// invocation. bench/optim_impl.py measures torch.optim's own paths on the
// same shapes.
//
// Parameter sets (shapes only; values random, gradients random and fixed):
//   resnet18     torchvision's resnet18 at 1000 classes: 62 tensors, 11,689,512 values
//   transformer  a GPT-2 layout, width 256, 12 blocks, 8192 tokens, 1024 positions:
//                148 tensors, 11,836,928 values (as many values, 2.4x the tensors)
//   tiny         experiments/lm.toml's gpt2 (width 64, 2 blocks, 256 tokens, 64
//                positions): 28 tensors, 120,576 values, where per-tensor cost dominates
//
// Each round builds every impl's optimizer afresh over the same parameters
// (order rotated per round), runs --warmup steps, then times optimizer steps
// alone (gradients stay set) until --min-time seconds have passed. Prints
// per set and impl the median steps/s over rounds, and the ratio of each impl
// to loop per round as median [min, max].
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <runner/sdk.hpp>

#include "flags.hpp"
#include "runner/host/host.hpp"

namespace {

namespace fs = std::filesystem;
using Shapes = std::vector<std::vector<std::int64_t>>;

Shapes resnet18() {
  Shapes s = {{64, 3, 7, 7}, {64}, {64}};
  std::int64_t in = 64;
  for (const std::int64_t out : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const std::int64_t from = block == 0 ? in : out;
      s.insert(s.end(), {{out, from, 3, 3}, {out}, {out}, {out, out, 3, 3}, {out}, {out}});
      if (block == 0 && from != out) s.insert(s.end(), {{out, from, 1, 1}, {out}, {out}});
    }
    in = out;
  }
  s.insert(s.end(), {{1000, 512}, {1000}});
  return s;
}

Shapes gpt2(std::int64_t width, std::int64_t depth, std::int64_t vocab, std::int64_t positions) {
  Shapes s = {{vocab, width}, {positions, width}};
  for (std::int64_t block = 0; block < depth; ++block)
    s.insert(s.end(), {{width}, {width}, {3 * width, width}, {3 * width}, {width, width}, {width},
                       {width}, {width}, {4 * width, width}, {4 * width}, {width, 4 * width},
                       {width}});
  s.insert(s.end(), {{width}, {width}});
  return s;
}

/// A module holding parameters of the given shapes, each with a fixed gradient.
struct ParameterSet : torch::nn::Module {
  explicit ParameterSet(const Shapes& shapes) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      torch::Tensor& p = register_parameter("p" + std::to_string(i), torch::randn(shapes[i]) * 0.02);
      p.mutable_grad() = torch::randn(shapes[i]) * 1e-3;
      values += p.numel();
    }
  }
  std::int64_t values = 0;
};

struct Settings {
  std::string optimizer = "adamw";
  std::vector<std::string> sets{"resnet18", "transformer", "tiny"};
  std::vector<std::string> impls{"loop", "foreach", "fused"};
  std::int64_t rounds = 5;
  std::int64_t warmup = 3;
  double min_time = 1.0;
  int threads = 1;
  fs::path plugins;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: runner-optim-impl [--optimizer adamw] [--sets resnet18,transformer,tiny]\n"
               "         [--impls loop,foreach,fused] [--rounds N] [--warmup N] [--min-time S]\n"
               "         [--threads N] [--plugins DIR]\n");
  std::exit(code);
}

Settings parse(int argc, char** argv) {
  const char* program = "runner-optim-impl";
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") usage(0);
    if (i + 1 >= argc) usage(2);
    const std::string value = argv[++i];
    if (flag == "--optimizer") s.optimizer = value;
    else if (flag == "--sets") s.sets = split(value);
    else if (flag == "--impls") s.impls = split(value);
    else if (flag == "--rounds") s.rounds = bench::flag_integer(program, flag, value, 1);
    else if (flag == "--warmup") s.warmup = bench::flag_integer(program, flag, value, 1);
    else if (flag == "--min-time") s.min_time = bench::flag_number(program, flag, value, 0.0);
    else if (flag == "--threads")
      s.threads = static_cast<int>(bench::flag_integer(program, flag, value, 1));
    else if (flag == "--plugins") s.plugins = value;
    else usage(2);
  }
  if (s.plugins.empty()) s.plugins = runner::default_plugin_paths().front();
  return s;
}

/// Steps per second of one impl: a fresh optimizer, warm-up, then timed steps.
double measure(const runner::PluginHost& host, const Settings& s, const std::string& impl,
               ParameterSet& set) {
  auto context = runner::make_optimizer_context(set, 1000);
  auto optimizer = host.make_optimizer(
      s.optimizer, runner::Options({{"impl", runner::OptionValue(impl)}}), context);
  torch::optim::Optimizer& o = optimizer->get();
  for (std::int64_t i = 0; i < s.warmup; ++i) o.step();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::int64_t steps = 0;
  double elapsed = 0;
  do {
    o.step();
    ++steps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < s.min_time);
  return static_cast<double>(steps) / elapsed;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  at::set_num_threads(s.threads);
  runner::PluginHost host;
  host.load(s.plugins / ("runner_plugin_" + s.optimizer + ".so"));
  const std::map<std::string, Shapes> known = {{"resnet18", resnet18()},
                                               {"transformer", gpt2(256, 12, 8192, 1024)},
                                               {"tiny", gpt2(64, 2, 256, 64)}};
  std::printf("%s, %d thread(s), %lld rounds, >= %.2f s per measurement\n", s.optimizer.c_str(),
              s.threads, static_cast<long long>(s.rounds), s.min_time);
  std::printf("%-12s %7s %10s", "set", "tensors", "values");
  for (const std::string& impl : s.impls) std::printf(" %10s/s", impl.c_str());
  for (std::size_t i = 1; i < s.impls.size(); ++i)
    std::printf("   %-26s", (s.impls[i] + "/" + s.impls[0] + " [min, max]").c_str());
  std::printf("\n");
  for (const std::string& name : s.sets) {
    const auto shapes = known.find(name);
    if (shapes == known.end()) {
      std::fprintf(stderr, "runner-optim-impl: unknown set '%s' (resnet18, transformer, tiny)\n",
                   name.c_str());
      return 2;
    }
    torch::manual_seed(0);
    ParameterSet set(shapes->second);
    std::map<std::string, std::vector<double>> rates;
    std::vector<std::vector<double>> ratios(s.impls.size());
    for (std::int64_t round = 0; round < s.rounds; ++round) {
      std::map<std::string, double> rate;
      for (std::size_t k = 0; k < s.impls.size(); ++k) {
        const std::string& impl =
            s.impls[(k + static_cast<std::size_t>(round)) % s.impls.size()];
        rate[impl] = measure(host, s, impl, set);
        rates[impl].push_back(rate[impl]);
      }
      for (std::size_t i = 1; i < s.impls.size(); ++i)
        ratios[i].push_back(rate[s.impls[i]] / rate[s.impls[0]]);
    }
    std::printf("%-12s %7zu %10lld", name.c_str(), shapes->second.size(),
                static_cast<long long>(set.values));
    for (const std::string& impl : s.impls) std::printf(" %12.1f", median(rates[impl]));
    for (std::size_t i = 1; i < s.impls.size(); ++i) {
      const auto [lo, hi] = std::minmax_element(ratios[i].begin(), ratios[i].end());
      std::printf("   %5.2f [%5.2f, %5.2f]          ", median(ratios[i]), *lo, *hi);
    }
    std::printf("\n");
  }
  return 0;
}
