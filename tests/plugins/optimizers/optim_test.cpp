// The optimizer plugins without the oracle: no_decay groups really have no
// weight decay, set_momentum where there is no momentum, the fused-kernel
// check (plugins/optimizers/common/kernels.hpp) and the exact errors for bad
// options, from the plugins and from the experiment layer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <runner/sdk.hpp>

#include "common/kernels.hpp"
#include "optim_support.hpp"
#include "runner/common/error.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::Json;
using runner::test::TestModel;

TestModel::Params random_parameters() {
  torch::manual_seed(0);
  TestModel::Params params;
  params["0.weight"] = torch::randn({16, 8});
  params["0.bias"] = torch::randn({16});
  params["1.weight"] = torch::rand({16}) + 0.5;
  params["1.bias"] = torch::randn({16});
  params["2.weight"] = torch::randn({4, 16});
  params["2.bias"] = torch::randn({4});
  return params;
}

struct Offer {
  std::string optimizer;
  std::vector<std::string> impls;
};

const std::vector<Offer> kOffers = {{"adam", {"loop", "foreach", "fused"}},
                                    {"adamw", {"loop", "foreach", "fused"}},
                                    {"rmsprop", {"loop", "foreach"}},
                                    {"adagrad", {"loop", "foreach", "fused"}},
                                    {"lion", {"loop", "foreach"}},
                                    {"sgd", {""}}};

// With zero gradients, weight decay is the only thing that moves a parameter
// (coupled decay turns it into a gradient, decoupled decay shrinks it): the
// parameters no_decay names must stay exactly where they are, the others must move.
TEST(OptimizerGroups, NoDecayParametersAreNotDecayedInAnyImpl) {
  runner::PluginHost host;
  host.load(runner::test::kBuiltins);
  const TestModel::Params initial = random_parameters();
  TestModel::Params zeros;
  for (const auto& [name, p] : initial) zeros[name] = torch::zeros_like(p);
  for (const Offer& offer : kOffers) {
    for (const std::string& impl : offer.impls) {
      const std::string what = offer.optimizer + " " + impl;
      Json options = {{"lr", 0.1}, {"weight_decay", 0.5}, {"no_decay", {"bias", "norm"}}};
      if (!impl.empty()) options["impl"] = impl;
      TestModel model(initial);
      auto optimizer =
          host.make_optimizer(offer.optimizer, runner::test::options_of(options), model.context());
      ASSERT_EQ(optimizer->get().param_groups().size(), 2u) << what;
      for (int step = 0; step < 2; ++step) {
        model.set_grads(zeros);
        optimizer->get().step();
      }
      const TestModel::Params after = model.parameters();
      for (const char* exempt : {"0.bias", "1.weight", "1.bias", "2.bias"})
        EXPECT_TRUE(after.at(exempt).equal(initial.at(exempt))) << what << ": " << exempt;
      for (const char* decayed : {"0.weight", "2.weight"})
        EXPECT_FALSE(after.at(decayed).equal(initial.at(decayed))) << what << ": " << decayed;

      // Without patterns: one group, and every parameter decays.
      TestModel plain(initial);
      options.erase("no_decay");
      auto one_group =
          host.make_optimizer(offer.optimizer, runner::test::options_of(options), plain.context());
      ASSERT_EQ(one_group->get().param_groups().size(), 1u) << what;
      plain.set_grads(zeros);
      one_group->get().step();
      for (const auto& [name, p] : plain.parameters())
        EXPECT_FALSE(p.equal(initial.at(name))) << what << " without no_decay: " << name;
    }
  }
}

TEST(OptimizerGroups, TheHostSetsEachGroupsLearningRate) {
  runner::PluginHost host;
  host.load(runner::test::kBuiltins);
  for (const Offer& offer : kOffers) {
    TestModel model(random_parameters());
    auto optimizer = host.make_optimizer(
        offer.optimizer, runner::test::options_of({{"lr", 0.25}, {"no_decay", {"bias"}}}),
        model.context());
    for (auto& group : optimizer->get().param_groups()) {
      EXPECT_EQ(group.options().get_lr(), 0.25) << offer.optimizer;
      group.options().set_lr(0.5);
      EXPECT_EQ(group.options().get_lr(), 0.5) << offer.optimizer;
    }
  }
}

TEST(OptimizerMomentum, AdagradHasNoMomentumToSet) {
  runner::PluginHost host;
  host.load(runner::test::kBuiltins);
  TestModel model(random_parameters());
  auto adagrad = host.make_optimizer("adagrad", runner::Options(), model.context());
  EXPECT_FALSE(adagrad->set_momentum(0.9));
  for (const char* name : {"adam", "adamw", "rmsprop", "lion", "sgd"}) {
    auto optimizer = host.make_optimizer(name, runner::Options(), model.context());
    EXPECT_TRUE(optimizer->set_momentum(0.9)) << name;
  }
}

// --- the fused-kernel check ----------------------------------------------------

TEST(FusedKernels, TheDispatcherSaysWhichDevicesHaveThem) {
  using runner_optimizers::has_kernel;
  for (const char* op : {"aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_adagrad_"}) {
    EXPECT_TRUE(has_kernel(op, "", c10::DeviceType::CPU)) << op;
    // ATen implements them for CPU, CUDA and MPS only, and a Linux LibTorch
    // carries no MPS kernels; XPU kernels come only with an XPU build.
    EXPECT_FALSE(has_kernel(op, "", c10::DeviceType::MPS)) << op;
    EXPECT_FALSE(has_kernel(op, "", c10::DeviceType::XPU)) << op;
  }
  // A composite kernel serves every backend: the foreach ops work anywhere.
  EXPECT_TRUE(has_kernel("aten::_foreach_add_", "Scalar", c10::DeviceType::MPS));
  EXPECT_FALSE(has_kernel("aten::_fused_lion_", "", c10::DeviceType::CPU));
  EXPECT_FALSE(has_kernel("aten::_fused_adam_", "no_such_overload", c10::DeviceType::CPU));
}

TEST(FusedKernels, AFusedImplWithoutAKernelIsAnOptionErrorBeforeAnyStep) {
  runner::PluginHost host;
  host.load(runner::test::kBuiltins);
  TestModel model(random_parameters());
  // The host builds the optimizer over a CPU stand-in to check its options.
  const runner::OptimizerContext mps = model.context(torch::Device(torch::kMPS));
  const std::map<std::string, std::string> ops = {{"adam", "aten::_fused_adam_"},
                                                  {"adamw", "aten::_fused_adamw_"},
                                                  {"adagrad", "aten::_fused_adagrad_"}};
  for (const auto& [name, op] : ops) {
    const std::string library = host.library_of(runner::PluginKind::optimizer, name).path;
    const std::string detail = "impl = \"fused\" needs a kernel of " + op +
                               " for device 'mps', and this LibTorch has none; use impl = "
                               "\"foreach\" (or \"loop\")";
    const runner::Options fused({{"impl", std::string("fused")}});
    EXPECT_THROW_MSG((void)host.make_optimizer(name, fused, mps), runner::PluginOptionError,
                     "optimizer plugin '" + name + "' (" + library +
                         ") refused option 'impl': " + detail);
    try {
      (void)host.make_optimizer(name, fused, mps);
    } catch (const runner::PluginOptionError& e) {
      EXPECT_EQ(e.option(), "impl");
      EXPECT_EQ(e.detail(), detail);
    }
    // The other impls need no particular kernel.
    for (const char* impl : {"loop", "foreach"})
      EXPECT_NO_THROW((void)host.make_optimizer(
          name, runner::Options({{"impl", std::string(impl)}}), mps))
          << name << " " << impl;
  }
}

// --- bad options -----------------------------------------------------------------

TEST(OptimizerOptions, ABetaOfOneIsRefusedAsPyTorchRefusesIt) {
  runner::PluginHost host;
  host.load(runner::test::kBuiltins);
  TestModel model(random_parameters());
  for (const char* name : {"adam", "adamw", "lion"}) {
    const std::string library = host.library_of(runner::PluginKind::optimizer, name).path;
    EXPECT_THROW_MSG(
        (void)host.make_optimizer(
            name, runner::Options({{"betas", std::vector<double>{0.9, 1.0}}}), model.context()),
        runner::PluginOptionError,
        std::string("optimizer plugin '") + name + "' (" + library +
            ") refused option 'betas': betas must each be below 1, found [0.9, 1.0]");
  }
}

// The experiment layer checks `impl` against the plugin's declared choices
// and points at the value in the file.
class ImplChoices : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("runner_optim_impl_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    host_.load(runner::test::kBuiltins);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Loads an experiment whose [optimizer] table is `optimizer`; returns its path.
  std::string write(const std::string& optimizer) {
    const fs::path file = dir_ / "exp.toml";
    std::ofstream(file) << "[model]\nplugin = \"mlp\"\n[data]\nplugin = \"synthetic\"\n"
                        << optimizer;
    return file.string();
  }

  fs::path dir_;
  runner::PluginHost host_;
};

TEST_F(ImplChoices, AnUnknownImplIsAnErrorAtItsValue) {
  const std::string adamw = write("[optimizer]\nplugin = \"adamw\"\nimpl = \"fast\"\n");
  EXPECT_THROW_MSG((void)runner::load_experiment(adamw, host_), runner::Error,
                   adamw + ":7:8: 'optimizer.impl' must be one of \"loop\", \"foreach\", "
                           "\"fused\", found \"fast\"");
  for (const char* name : {"rmsprop", "lion"}) {
    const std::string file =
        write(std::string("[optimizer]\nplugin = \"") + name + "\"\nimpl = \"fused\"\n");
    EXPECT_THROW_MSG((void)runner::load_experiment(file, host_), runner::Error,
                     file + ":7:8: 'optimizer.impl' must be one of \"loop\", \"foreach\", "
                            "found \"fused\"");
  }
  const std::string ok = write("[optimizer]\nplugin = \"adagrad\"\nimpl = \"fused\"\n");
  EXPECT_NO_THROW((void)runner::load_experiment(ok, host_));
}

}  // namespace
