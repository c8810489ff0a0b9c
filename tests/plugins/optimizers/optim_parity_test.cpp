// The optimizer plugins against torch.optim: from the same initial
// parameters, through the same ten gradients, every optimizer in every impl it
// offers lands on the parameters PyTorch's optimizer of the same path reaches
// (loop: foreach=False, foreach: foreach=True, fused: fused=True; Lion: the
// paper's update written in plain torch by the oracle). Non-default
// hyper-parameters throughout: weight decay with no_decay = ["bias", "norm"],
// amsgrad, centered RMSprop with momentum, Nesterov SGD, Adagrad's lr decay;
// some cases change the learning rate and the momentum (set_momentum) at
// every step, as a schedule would.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <runner/sdk.hpp>

#include "optim_support.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::Json;

// Both sides run the same ATen kernels in the same order (the oracle's torch
// is the build's LibTorch), so the paths PyTorch also has agree to rounding
// noise; measured: every case bitwise equal (max |difference| 0, printed per
// case). The bounds leave room for a different vectorisation on another CPU,
// and are still far below what any slip in the algorithm gives (one step of
// a misplaced bias correction or weight decay moves parameters by ~1e-3).
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-7;
// Different impls of one optimizer in runner (loop against fused) agree to
// float32 rounding, not bit for bit: the fused kernels order the arithmetic
// their own way.
constexpr double kImplRtol = 1e-5;
constexpr double kImplAtol = 1e-6;

struct Case {
  std::string name;
  std::string optimizer;
  Json options;                  ///< as an experiment file writes them (impl included)
  std::vector<double> lrs;       ///< per step, set on every group before it (empty: constant)
  std::vector<double> momenta;   ///< per step, through set_momentum (empty: never called)
};

using Params = std::map<std::string, torch::Tensor>;

struct Reference {
  Params initial;
  std::vector<Params> grads;  ///< per step; a missing name has no gradient at that step
  std::map<std::string, Params> after;
};

Params tensors_of(const c10::IValue& dict) {
  Params out;
  for (const auto& entry : dict.toGenericDict())
    out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

Reference reference(const std::vector<Case>& cases, const std::string& dtype) {
  const std::string stem = (fs::temp_directory_path() /
                            ("runner_optim_" + std::to_string(::getpid()) + "_" + cases[0].name))
                               .string();
  Json spec = Json::array();
  for (const Case& c : cases)
    spec.push_back({{"name", c.name},
                    {"optimizer", c.optimizer},
                    {"options", c.options},
                    {"lrs", c.lrs},
                    {"momenta", c.momenta}});
  std::ofstream(stem + ".json") << spec.dump();
  const auto r = runner::test::run_oracle("optim_reference.py",
                                          {"--cases", stem + ".json", "--out", stem + ".pt",
                                           "--dtype", dtype});
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(stem + ".pt", std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(stem + ".json");
  fs::remove(stem + ".pt");
  const c10::IValue all = torch::pickle_load(bytes);
  const auto dict = all.toGenericDict();
  Reference ref;
  ref.initial = tensors_of(dict.at("initial"));
  for (const auto& step : dict.at("grads").toList()) ref.grads.push_back(tensors_of(step));
  for (const auto& entry : dict.at("after").toGenericDict())
    ref.after[entry.key().toStringRef()] = tensors_of(entry.value());
  return ref;
}

/// Runs a case in runner: the plugin built by the host over the test model.
Params run(const runner::PluginHost& host, const Case& c, const Reference& ref) {
  runner::test::TestModel model(ref.initial);
  auto optimizer = host.make_optimizer(c.optimizer, runner::test::options_of(c.options),
                                       model.context());
  torch::optim::Optimizer& torch_optimizer = optimizer->get();
  for (std::size_t step = 0; step < ref.grads.size(); ++step) {
    if (!c.lrs.empty())
      for (auto& group : torch_optimizer.param_groups()) group.options().set_lr(c.lrs[step]);
    if (!c.momenta.empty()) {
      EXPECT_TRUE(optimizer->set_momentum(c.momenta[step])) << c.name;
    }
    model.set_grads(ref.grads[step]);
    torch_optimizer.step();
  }
  return model.parameters();
}

struct Difference {
  double abs = 0, rel = 0;
  bool close = true;
};

Difference compare(const Params& actual, const Params& expected, double rtol, double atol) {
  Difference d;
  for (const auto& [name, a] : actual) {
    const torch::Tensor& e = expected.at(name);
    const torch::Tensor diff = (a - e).abs();
    d.abs = std::max(d.abs, diff.max().item<double>());
    d.rel = std::max(d.rel, (diff / e.abs().clamp_min(1e-30)).max().item<double>());
    d.close = d.close && a.allclose(e, rtol, atol);
  }
  return d;
}

/// The parity bounds of a dtype: against torch, and between one optimizer's impls.
struct Bounds {
  double rtol, atol, impl_rtol, impl_atol;
};
constexpr Bounds kFloat32{kRtol, kAtol, kImplRtol, kImplAtol};

void check(const std::vector<Case>& cases, const std::string& dtype = "float32",
           const Bounds& bounds = kFloat32) {
  RUNNER_REQUIRE_ORACLE("torch");
  at::set_num_threads(1);
  const Reference ref = reference(cases, dtype);
  ASSERT_EQ(ref.after.size(), cases.size());
  runner::PluginHost host;
  host.load(runner::test::kBuiltins);
  std::map<std::string, Params> ours;
  for (const Case& c : cases) {
    ours[c.name] = run(host, c, ref);
    const Difference d = compare(ours[c.name], ref.after.at(c.name), bounds.rtol, bounds.atol);
    std::printf("[ measured ] %-28s max |runner - torch| %.3g (relative %.3g)\n", c.name.c_str(),
                d.abs, d.rel);
    EXPECT_TRUE(d.close) << c.name << ": max |difference| " << d.abs << ", relative " << d.rel;
    // The case must have moved every parameter, or it would prove nothing.
    for (const auto& [name, p] : ours[c.name]) {
      EXPECT_FALSE(p.equal(ref.initial.at(name))) << c.name << ": " << name << " never moved";
      EXPECT_EQ(p.scalar_type(), ref.initial.at(name).scalar_type()) << c.name << ": " << name;
    }
  }
  // The impls of one configuration agree with each other to float32 rounding.
  for (const Case& c : cases) {
    const auto dash = c.name.rfind('-');
    const std::string loop = c.name.substr(0, dash) + "-loop";
    if (dash == std::string::npos || loop == c.name || ours.count(loop) == 0) continue;
    const Difference d = compare(ours[c.name], ours[loop], bounds.impl_rtol, bounds.impl_atol);
    std::printf("[ measured ] %-28s max |impl - loop|   %.3g (relative %.3g)\n", c.name.c_str(),
                d.abs, d.rel);
    EXPECT_TRUE(d.close) << c.name << " against " << loop << ": max |difference| " << d.abs;
  }
}

/// One configuration in each of `impls`: cases named "<stem>-<impl>".
std::vector<Case> impls(const std::string& stem, const std::string& optimizer, const Json& options,
                        const std::vector<std::string>& impls, std::vector<double> lrs = {},
                        std::vector<double> momenta = {}) {
  std::vector<Case> cases;
  for (const std::string& impl : impls) {
    Json o = options;
    o["impl"] = impl;
    cases.push_back({stem + "-" + impl, optimizer, o, lrs, momenta});
  }
  return cases;
}

std::vector<Case> operator+(std::vector<Case> a, const std::vector<Case>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const Json kNoDecay = Json::array({"bias", "norm"});
const std::vector<std::string> kAll = {"loop", "foreach", "fused"};
const std::vector<std::string> kUnfused = {"loop", "foreach"};
// A warm-up-then-decay learning rate and a one-cycle-like momentum, per step.
const std::vector<double> kLrs = {0.002, 0.004, 0.006, 0.008, 0.01, 0.008, 0.006, 0.004, 0.002,
                                  0.001};
const std::vector<double> kMomenta = {0.95, 0.93, 0.91, 0.89, 0.87, 0.85, 0.87, 0.89, 0.91, 0.93};

Json adam_options(double weight_decay, bool amsgrad) {
  return {{"lr", 0.01},          {"betas", {0.8, 0.99}}, {"eps", 1e-6},
          {"weight_decay", weight_decay}, {"amsgrad", amsgrad}, {"no_decay", kNoDecay}};
}

TEST(OptimizerParity, AdamMatchesTorchOptimAdamInEveryImpl) {
  check(impls("adam", "adam", adam_options(0.1, false), kAll) +
        impls("adam_amsgrad", "adam", adam_options(0.1, true), kAll) +
        impls("adam_schedule", "adam", adam_options(0.1, false), kAll, kLrs, kMomenta));
}

TEST(OptimizerParity, AdamWMatchesTorchOptimAdamWInEveryImpl) {
  check(impls("adamw", "adamw", adam_options(0.5, false), kAll) +
        impls("adamw_amsgrad", "adamw", adam_options(0.5, true), kAll) +
        impls("adamw_schedule", "adamw", adam_options(0.5, false), kAll, kLrs, kMomenta));
}

TEST(OptimizerParity, RmspropMatchesTorchOptimRmspropInEveryImpl) {
  const Json centered = {{"lr", 0.01},      {"alpha", 0.9},       {"eps", 1e-6},
                         {"weight_decay", 0.1}, {"momentum", 0.8}, {"centered", true},
                         {"no_decay", kNoDecay}};
  const Json plain = {{"lr", 0.01},       {"alpha", 0.95},      {"eps", 1e-7},
                      {"weight_decay", 0.1}, {"momentum", 0.0}, {"centered", false},
                      {"no_decay", kNoDecay}};
  // Built with momentum 0 and cycled from the first step: the momentum
  // buffer is made then, as PyTorch's OneCycleLR with RMSprop has it.
  check(impls("rmsprop_centered", "rmsprop", centered, kUnfused) +
        impls("rmsprop", "rmsprop", plain, kUnfused) +
        impls("rmsprop_schedule", "rmsprop", plain, kUnfused, kLrs, kMomenta));
}

TEST(OptimizerParity, AdagradMatchesTorchOptimAdagradInEveryImpl) {
  const Json options = {{"lr", 0.05},
                        {"lr_decay", 0.01},
                        {"weight_decay", 0.1},
                        {"initial_accumulator_value", 0.1},
                        {"eps", 1e-8},
                        {"no_decay", kNoDecay}};
  check(impls("adagrad", "adagrad", options, kAll) +
        impls("adagrad_schedule", "adagrad", options, kAll, kLrs));
}

TEST(OptimizerParity, LionMatchesThePapersUpdateInEveryImpl) {
  const Json options = {{"lr", 0.001}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.5},
                        {"no_decay", kNoDecay}};
  check(impls("lion", "lion", options, kUnfused) +
        impls("lion_schedule", "lion", options, kUnfused, kLrs, kMomenta));
}

TEST(OptimizerParity, SgdMatchesTorchOptimSgd) {
  const Json nesterov = {{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true},
                         {"weight_decay", 0.1}, {"no_decay", kNoDecay}};
  const Json plain = {{"lr", 0.05}, {"momentum", 0.0}, {"weight_decay", 0.1}};
  check({{"sgd_nesterov", "sgd", nesterov, {}, {}},
         {"sgd", "sgd", plain, {}, {}},
         // Built without momentum, cycled from the first step (OneCycleLR).
         {"sgd_schedule", "sgd", plain, kLrs, kMomenta}});
}

// bfloat16 parameters and gradients, as `[train] precision = "bf16"` trains
// them: the optimizer state is bfloat16 too (torch.optim keeps it in the
// parameters' dtype), and every scalar of an update must reach the kernel as
// PyTorch passes it (runner_optimizers::python_number). Each path is held to
// torch's path of the same name bit for bit (measured: max |difference| 0 in
// every case). Between paths the bound is loose on purpose: PyTorch's own
// loop and foreach differ in bfloat16 (measured here, runner's paths as
// torch's: up to 0.0098 for RMSprop, 0.0195 = 2 lr for Lion, where one
// rounding flips the sign of an update).
constexpr Bounds kBfloat16{0, 0, 0, 0.03};

TEST(OptimizerParity, EveryOptimizerMatchesTorchOnBfloat16Parameters) {
  check(impls("adam_bf16", "adam", adam_options(0.1, true), kAll) +
            impls("adamw_bf16", "adamw", adam_options(0.5, false), kAll, kLrs, kMomenta) +
            impls("rmsprop_bf16", "rmsprop",
                  {{"lr", 0.01}, {"alpha", 0.9}, {"eps", 1e-6}, {"weight_decay", 0.1},
                   {"momentum", 0.8}, {"centered", true}, {"no_decay", kNoDecay}},
                  kUnfused) +
            impls("adagrad_bf16", "adagrad",
                  {{"lr", 0.05}, {"lr_decay", 0.01}, {"weight_decay", 0.1},
                   {"initial_accumulator_value", 0.1}, {"eps", 1e-8}, {"no_decay", kNoDecay}},
                  kAll) +
            // lr 0.01: a step of 0.001 is below bfloat16's spacing at 1.0 (2^-7).
            impls("lion_bf16", "lion",
                  {{"lr", 0.01}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.5},
                   {"no_decay", kNoDecay}},
                  kUnfused) +
            std::vector<Case>{{"sgd_bf16", "sgd",
                               {{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true},
                                {"weight_decay", 0.1}, {"no_decay", kNoDecay}},
                               {},
                               {}}},
        "bfloat16", kBfloat16);
}

}  // namespace
