// Dynamic loss scaling against torch.amp.GradScaler("cpu"): the same skipped
// steps, the same scale and growth tracker after every update, the same
// parameters after SGD, with inf and nan gradients injected at chosen steps;
// and the exact errors of bad options and of calls out of order.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/training/clip.hpp"
#include "runner/training/grad_scaler.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::training::GradScaler;
using runner::training::GradScalerOptions;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

struct Scenario {
  std::int64_t steps = 0;
  std::int64_t growth_interval = 2000;
  std::map<std::int64_t, double> inject;  // step -> value put in the weight's gradient
  double clip = 0.0;                      // > 0: unscale, clip to this norm, then step
};

struct Trace {
  std::vector<bool> skipped;
  std::vector<double> scales;
  std::vector<std::int64_t> trackers;
  std::map<std::string, torch::Tensor> after;
};

std::string inject_text(const Scenario& s) {
  std::string text;
  for (const auto& [step, value] : s.inject) {
    if (!text.empty()) text += ",";
    text += std::to_string(step) + ":" + (std::isnan(value) ? "nan" : "inf");
  }
  return text;
}

c10::Dict<c10::IValue, c10::IValue> reference(const Scenario& s) {
  const fs::path out =
      fs::temp_directory_path() / ("runner_grad_scaler_" + std::to_string(::getpid()) + ".pt");
  std::vector<std::string> args{"--steps", std::to_string(s.steps), "--growth-interval",
                                std::to_string(s.growth_interval), "--out", out.string()};
  if (!s.inject.empty()) args.insert(args.end(), {"--inject", inject_text(s)});
  if (s.clip > 0) args.insert(args.end(), {"--clip", std::to_string(s.clip)});
  const auto r = runner::test::run_oracle("grad_scaler_reference.py", args);
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(out);
  return torch::pickle_load(bytes).toGenericDict();
}

torch::Tensor tensor_at(const c10::Dict<c10::IValue, c10::IValue>& dict, const std::string& key) {
  return dict.at(key).toTensor();
}

// The oracle's loop in LibTorch with runner's GradScaler.
Trace run(const Scenario& s, const c10::Dict<c10::IValue, c10::IValue>& ref) {
  const auto initial = ref.at("initial").toGenericDict();
  torch::Tensor w = tensor_at(initial, "w").clone().requires_grad_();
  torch::Tensor b = tensor_at(initial, "b").clone().requires_grad_();
  torch::Tensor unused = tensor_at(initial, "unused").clone().requires_grad_();
  const torch::Tensor x = tensor_at(ref, "x");
  const torch::Tensor y = tensor_at(ref, "y");
  torch::optim::SGD sgd({w, b, unused}, torch::optim::SGDOptions(0.05).momentum(0.9));
  GradScalerOptions options;
  options.growth_interval = s.growth_interval;
  GradScaler scaler(options);
  Trace trace;
  for (std::int64_t step = 0; step < s.steps; ++step) {
    sgd.zero_grad();
    const torch::Tensor loss = (torch::matmul(x, w.t()) + b - y).pow(2).mean();
    scaler.scale(loss).backward();
    if (const auto it = s.inject.find(step); it != s.inject.end())
      w.mutable_grad().index_put_({1, 2}, it->second);
    if (s.clip > 0) {
      scaler.unscale({w, b, unused});
      static_cast<void>(runner::training::clip_grad_norm({w, b, unused}, s.clip));
    }
    trace.skipped.push_back(!scaler.step(sgd));
    scaler.update();
    trace.scales.push_back(scaler.current_scale());
    trace.trackers.push_back(scaler.growth_tracker());
  }
  trace.after = {{"w", w.detach()}, {"b", b.detach()}, {"unused", unused.detach()}};
  EXPECT_FALSE(unused.grad().defined());  // skipped, never unscaled
  return trace;
}

// Fills `trace` with runner's run of `s` and compares it with PyTorch's.
void check_parity(const Scenario& s, Trace& trace) {
  at::set_num_threads(1);
  const auto ref = reference(s);
  trace = run(s, ref);
  const torch::Tensor skipped = tensor_at(ref, "skipped");
  const torch::Tensor scales = tensor_at(ref, "scales");
  const torch::Tensor trackers = tensor_at(ref, "trackers");
  ASSERT_EQ(skipped.numel(), s.steps);
  for (std::int64_t step = 0; step < s.steps; ++step) {
    const auto k = static_cast<std::size_t>(step);
    ASSERT_EQ(trace.skipped[k], skipped[step].item<bool>()) << "step " << step;
    ASSERT_EQ(trace.scales[k], scales[step].item<double>()) << "scale after step " << step;
    ASSERT_EQ(trace.trackers[k], trackers[step].item<std::int64_t>()) << "tracker at " << step;
  }
  // Every injected step was skipped and backed off by exactly 0.5; no other was skipped.
  for (std::int64_t step = 0; step < s.steps; ++step) {
    const auto k = static_cast<std::size_t>(step);
    EXPECT_EQ(trace.skipped[k], s.inject.count(step) == 1) << "step " << step;
    const double before = step == 0 ? 65536.0 : trace.scales[k - 1];
    if (trace.skipped[k]) {
      EXPECT_EQ(trace.scales[k], before * 0.5) << "step " << step;
    }
  }
  // The same kernels on the same values: the parameters agree to the bit.
  const auto after = ref.at("after").toGenericDict();
  for (const auto& [name, tensor] : trace.after)
    EXPECT_TRUE(torch::equal(tensor, tensor_at(after, name)))
        << name << ": max |difference| "
        << (tensor - tensor_at(after, name)).abs().max().item<double>();
}

TEST(GradScalerParity, SkipsBacksOffAndGrowsAsPyTorchWithAGrowthIntervalOf3) {
  RUNNER_REQUIRE_ORACLE("torch");
  Scenario s;
  s.steps = 24;
  s.growth_interval = 3;
  s.inject = {{4, kInf}, {9, kNan}, {10, kInf}, {17, kNan}};
  Trace trace;
  ASSERT_NO_FATAL_FAILURE(check_parity(s, trace));
  // Three clean steps after the back-off at step 4 (5, 6, 7): doubled after 7.
  EXPECT_EQ(trace.scales[6], trace.scales[4]);
  EXPECT_EQ(trace.scales[7], 2 * trace.scales[4]);
}

TEST(GradScalerParity, DefaultsGrowTheScaleAfter2000CleanSteps) {
  RUNNER_REQUIRE_ORACLE("torch");
  Scenario s;
  s.steps = 2010;
  s.inject = {{5, kInf}, {2007, kNan}};
  Trace trace;
  ASSERT_NO_FATAL_FAILURE(check_parity(s, trace));
  // Steps 6 to 2005 are the 2000 clean steps in a row: the scale doubles
  // after step 2005 and not before.
  EXPECT_EQ(trace.scales[5], 32768.0);
  EXPECT_EQ(trace.scales[2004], 32768.0);
  EXPECT_EQ(trace.scales[2005], 65536.0);
  EXPECT_EQ(trace.trackers[2005], 0);
  EXPECT_EQ(trace.scales[2007], 32768.0);
}

TEST(GradScalerParity, UnscalingBeforeClippingMatchesPyTorch) {
  RUNNER_REQUIRE_ORACLE("torch");
  Scenario s;
  s.steps = 12;
  s.growth_interval = 3;
  s.inject = {{2, kNan}, {7, kInf}};
  s.clip = 0.5;
  Trace trace;
  check_parity(s, trace);
}

TEST(GradScaler, OptionsOutOfRangeAreRefused) {
  GradScalerOptions o;
  o.init_scale = 0.0;
  EXPECT_EQ(runner::training::grad_scaler_error(o), "the initial loss scale is 0; it must be above 0");
  o = {};
  o.growth_factor = 1.0;
  EXPECT_EQ(runner::training::grad_scaler_error(o),
            "the loss scale's growth factor is 1; it must be above 1");
  o = {};
  o.backoff_factor = 1.0;
  EXPECT_EQ(runner::training::grad_scaler_error(o),
            "the loss scale's backoff factor is 1; it must be in (0, 1)");
  o.backoff_factor = 0.0;
  EXPECT_EQ(runner::training::grad_scaler_error(o),
            "the loss scale's backoff factor is 0; it must be in (0, 1)");
  o = {};
  o.growth_interval = 0;
  EXPECT_EQ(runner::training::grad_scaler_error(o),
            "the loss scale's growth interval is 0 steps; it must be at least 1");
  EXPECT_THROW_MSG(GradScaler{o}, runner::Error,
                   "the loss scale's growth interval is 0 steps; it must be at least 1");
  EXPECT_EQ(runner::training::grad_scaler_error({}), std::nullopt);
}

TEST(GradScaler, CallsOutOfOrderAreLogicErrors) {
  torch::Tensor w = torch::ones({2}).requires_grad_();
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  EXPECT_EQ(scaler.current_scale(), 65536.0);
  EXPECT_FALSE(scaler.scale_tensor().defined());
  EXPECT_THROW_MSG(scaler.unscale({w}), std::logic_error,
                   "GradScaler::unscale: no loss was scaled yet; call scale() first");
  scaler.scale((w * 2).sum()).backward();
  EXPECT_EQ(w.grad()[0].item<float>(), 2.0F * 65536.0F);
  EXPECT_THROW_MSG(scaler.update(), std::logic_error,
                   "GradScaler: no gradient was unscaled since the last update(), so none was "
                   "checked for inf/nan; call unscale() or step() after backward");
  scaler.unscale({w});
  EXPECT_EQ(w.grad()[0].item<float>(), 2.0F);
  EXPECT_FALSE(scaler.found_inf());
  EXPECT_THROW_MSG(scaler.unscale({w}), std::logic_error,
                   "GradScaler::unscale: already called since the last update()");
  EXPECT_TRUE(scaler.step(sgd));
  EXPECT_THROW_MSG(scaler.step(sgd), std::logic_error,
                   "GradScaler::step: already called since the last update()");
  EXPECT_THROW_MSG(scaler.unscale({w}), std::logic_error,
                   "GradScaler::unscale: called after step(); call update() first");
  scaler.update();
  EXPECT_EQ(scaler.growth_tracker(), 1);
  EXPECT_EQ(scaler.current_scale(), 65536.0);
}

TEST(GradScaler, Float16GradientsAreRefusedAsPyTorchDoes) {
  torch::Tensor w = torch::ones({2}, torch::kHalf).requires_grad_();
  GradScaler scaler;
  scaler.scale(w.to(torch::kFloat).sum()).backward();
  ASSERT_EQ(w.grad().scalar_type(), torch::kHalf);
  EXPECT_THROW_MSG(scaler.unscale({w}), runner::Error,
                   "loss scaling cannot unscale float16 gradients (as torch.amp.GradScaler)");
}

TEST(GradScaler, AnInfGradientSkipsTheStepAndLeavesTheParametersAlone) {
  torch::Tensor w = torch::ones({3}).requires_grad_();
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.1));
  GradScalerOptions options;
  options.init_scale = 8.0;
  options.backoff_factor = 0.25;
  GradScaler scaler(options);
  scaler.scale(w.sum()).backward();
  w.mutable_grad().index_put_({0}, kInf);
  EXPECT_FALSE(scaler.step(sgd));
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_EQ(scaler.found_inf_tensor().item<float>(), 1.0F);
  scaler.update();
  EXPECT_TRUE(torch::equal(w.detach(), torch::ones({3})));
  EXPECT_EQ(scaler.current_scale(), 2.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

}  // namespace
