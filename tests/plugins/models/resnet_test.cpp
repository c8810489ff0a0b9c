// The resnet plugin against torchvision: the same names and shapes, the same
// logits from the same weights (eval and train mode), the same parameters
// after SGD steps, the same parameter count, FLOPs within 2 %.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <runner/sdk.hpp>

#include "runner/common/error.hpp"
#include "runner/host/host.hpp"
#include "support/module_state.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

// float32 tolerance of the comparisons: both sides run the same ATen kernels
// (the oracle's torch is the build's LibTorch), so the differences are
// summation-order noise.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

runner::ModelContext images(std::int64_t size, std::int64_t classes) {
  runner::ModelContext context;
  context.input_shape = {3, size, size};
  context.num_classes = classes;
  return context;
}

std::unique_ptr<runner::Model> make_resnet(runner::PluginHost& host, std::int64_t depth,
                                           const std::string& stem,
                                           const runner::ModelContext& context,
                                           std::int64_t num_classes = 0) {
  return host.make_model("resnet",
                         runner::Options({{"depth", depth},
                                          {"stem", stem},
                                          {"num_classes", num_classes},
                                          {"zero_init_residual", false}}),
                         context);
}

using runner::test::state_of;

std::map<std::string, torch::Tensor> tensors_of(const c10::IValue& dict) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : dict.toGenericDict())
    out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

struct Reference {
  c10::IValue all;
  std::map<std::string, torch::Tensor> state, after;
  torch::Tensor get(const std::string& key) const {
    return all.toGenericDict().at(key).toTensor();
  }
  std::int64_t integer(const std::string& key) const {
    return all.toGenericDict().at(key).toInt();
  }
};

Reference reference(std::int64_t depth, const std::string& stem, std::int64_t classes) {
  const fs::path out = fs::temp_directory_path() /
                       ("runner_resnet_" + std::to_string(::getpid()) + "_" +
                        std::to_string(depth) + stem + ".pt");
  const auto r = runner::test::run_oracle(
      "resnet_reference.py", {"--depth", std::to_string(depth), "--stem", stem, "--classes",
                              std::to_string(classes), "--out", out.string()});
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(out);
  Reference ref;
  ref.all = torch::pickle_load(bytes);
  ref.state = tensors_of(ref.all.toGenericDict().at("state"));
  ref.after = tensors_of(ref.all.toGenericDict().at("after"));
  return ref;
}

void load(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : state_of(module)) tensor.copy_(state.at(name));
}

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected,
                  const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(actual.allclose(expected, kRtol, kAtol))
      << what << ": max |difference| " << (actual - expected).abs().max().item<double>();
}

void check_parity(std::int64_t depth, const std::string& stem) {
  RUNNER_REQUIRE_ORACLE("torch,torchvision");
  const std::int64_t classes = 10;
  const Reference ref = reference(depth, stem, classes);
  runner::PluginHost host;
  host.load(kBuiltins);
  at::set_num_threads(1);
  auto model = make_resnet(host, depth, stem, images(32, classes));
  torch::nn::Module& module = model->module();

  // Names and shapes: exactly torchvision's state dict.
  std::map<std::string, std::vector<std::int64_t>> ours, theirs;
  for (const auto& [name, t] : state_of(module)) ours[name] = t.sizes().vec();
  for (const auto& [name, t] : ref.state) theirs[name] = t.sizes().vec();
  ASSERT_EQ(ours, theirs);
  EXPECT_EQ(model->parameter_count(), ref.integer("params"));
  const double flops = *model->flops_per_sample();
  const auto expected_flops = static_cast<double>(ref.integer("flops"));
  EXPECT_NEAR(flops / expected_flops, 1.0, 0.02) << flops << " vs " << expected_flops;

  load(module, ref.state);
  runner::Batch batch;
  batch.inputs = ref.get("x");
  batch.targets = ref.get("targets");
  batch.size = batch.inputs.size(0);
  module.eval();
  {
    torch::NoGradGuard no_grad;
    expect_close(model->forward(batch), ref.get("eval_out"), "eval-mode logits");
  }
  // Train mode: batch norm normalises with the batch's statistics and
  // updates its running ones; 5 SGD steps must land on torchvision's state.
  module.train();
  torch::optim::SGD sgd(module.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    const torch::Tensor out = model->forward(batch);
    if (step == 0) expect_close(out.detach(), ref.get("train_out"), "train-mode logits");
    model->loss(out, batch).backward();
    sgd.step();
  }
  for (const auto& [name, tensor] : state_of(module)) {
    if (name.ends_with("num_batches_tracked")) {
      EXPECT_EQ(tensor.item<std::int64_t>(), ref.after.at(name).item<std::int64_t>()) << name;
      continue;
    }
    // Five steps compound the rounding: a looser bound than one forward.
    EXPECT_TRUE(tensor.allclose(ref.after.at(name), 1e-3, 1e-5))
        << name << " after 5 SGD steps: max |difference| "
        << (tensor - ref.after.at(name)).abs().max().item<double>();
  }
}

TEST(ResNetParity, ResNet18WithTheCifarStemMatchesTorchvision) { check_parity(18, "cifar"); }
TEST(ResNetParity, ResNet18WithTheImageNetStemMatchesTorchvision) { check_parity(18, "imagenet"); }
TEST(ResNetParity, ResNet50MatchesTorchvision) { check_parity(50, "imagenet"); }

TEST(ResNet, ParameterCountsAtAThousandClassesAreTorchvisions) {
  runner::PluginHost host;
  host.load(kBuiltins);
  // torchvision's documented sizes of resnet18 and resnet50 (ImageNet, 1000 classes).
  EXPECT_EQ(make_resnet(host, 18, "imagenet", images(224, 1000))->parameter_count(), 11689512);
  EXPECT_EQ(make_resnet(host, 50, "imagenet", images(224, 1000))->parameter_count(), 25557032);
  // num_classes overrides the loader's (1000-class weights on 10-class data).
  EXPECT_EQ(make_resnet(host, 18, "imagenet", images(32, 10), 1000)->parameter_count(), 11689512);
}

TEST(ResNet, ZeroInitResidualZeroesEachBlocksLastNormScale) {
  runner::PluginHost host;
  host.load(kBuiltins);
  for (const std::int64_t depth : {18, 50}) {
    auto model = host.make_model(
        "resnet", runner::Options({{"depth", depth}, {"zero_init_residual", true}}),
        images(32, 10));
    const auto state = state_of(model->module());
    const std::string last = depth == 18 ? "bn2" : "bn3";
    EXPECT_TRUE(state.at("layer1.0." + last + ".weight").eq(0).all().item<bool>());
    EXPECT_TRUE(state.at("layer4.1." + last + ".weight").eq(0).all().item<bool>());
    EXPECT_TRUE(state.at("layer1.0.bn1.weight").eq(1).all().item<bool>());
  }
}

TEST(ResNet, BadShapesAndOptionsAreClearErrors) {
  runner::PluginHost host;
  host.load(kBuiltins);
  const std::string library = host.library_of(runner::PluginKind::model, "resnet").path;
  const std::string prefix = "model plugin 'resnet' (" + library + ") failed: ";
  // Options that do not fit name the option (also checked before any run).
  const auto refused = [&](const std::string& option) {
    return "model plugin 'resnet' (" + library + ") refused option '" + option + "': ";
  };
  runner::ModelContext grey = images(32, 10);
  grey.input_shape = {1, 32, 32};
  EXPECT_THROW_MSG((void)make_resnet(host, 18, "cifar", grey), runner::Error,
                   prefix + "needs RGB image samples [3, height, width]; set the loader's "
                            "shape, e.g. shape = [3, 32, 32]");
  EXPECT_THROW_MSG((void)make_resnet(host, 20, "cifar", images(32, 10)), runner::Error,
                   refused("depth") + "depth must be 18, 34, 50, 101 or 152, not 20");
  EXPECT_THROW_MSG((void)make_resnet(host, 18, "cifar", images(32, 10), 5), runner::Error,
                   refused("num_classes") + "num_classes = 5 is fewer than the loader's 10 classes; raise it or "
                            "leave it at 0 (the loader's)");
}

}  // namespace
