// The vit plugin against torchvision's VisionTransformer: the same names and
// shapes, the same logits from the same weights (eval and train mode), the
// same parameters after SGD steps, the same parameter count, FLOPs within 2 %
// of torch.utils.flop_counter's; torchvision's initialisation; clear errors
// for images a ViT cannot take.
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
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

// float32 tolerance of one forward pass: both sides run the same ATen kernels
// (the oracle's torch is the build's LibTorch), so the differences are
// summation-order noise (torchvision's eval path under no_grad is the fused
// native multi-head attention, ours scaled_dot_product_attention).
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
// After 5 SGD steps the rounding has compounded: as resnet_test.
constexpr double kStepsRtol = 1e-3;
constexpr double kStepsAtol = 1e-5;

runner::ModelContext images(std::int64_t height, std::int64_t width, std::int64_t classes) {
  runner::ModelContext context;
  context.input_shape = {3, height, width};
  context.num_classes = classes;
  return context;
}

std::unique_ptr<runner::Model> make_vit(runner::PluginHost& host, const std::string& config,
                                        std::int64_t patch_size,
                                        const runner::ModelContext& context,
                                        std::int64_t num_classes = 0, std::int64_t image_size = 0,
                                        double dropout = 0.0) {
  return host.make_model("vit",
                         runner::Options({{"config", config},
                                          {"patch_size", patch_size},
                                          {"image_size", image_size},
                                          {"num_classes", num_classes},
                                          {"dropout", dropout},
                                          {"attention_dropout", dropout}}),
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
  torch::Tensor get(const std::string& key) const {
    return all.toGenericDict().at(key).toTensor();
  }
  std::int64_t integer(const std::string& key) const {
    return all.toGenericDict().at(key).toInt();
  }
  std::map<std::string, torch::Tensor> tensors(const std::string& key) const {
    return tensors_of(all.toGenericDict().at(key));
  }
};

/// Runs the oracle with `args`; `tag` names its output file.
Reference reference(const std::string& tag, const std::vector<std::string>& args) {
  const fs::path out = fs::temp_directory_path() /
                       ("runner_vit_" + std::to_string(::getpid()) + "_" + tag + ".pt");
  std::vector<std::string> all = args;
  all.insert(all.end(), {"--out", out.string()});
  const auto r = runner::test::run_oracle("vit_reference.py", all);
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(out);
  return Reference{torch::pickle_load(bytes)};
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

void expect_flops_near(runner::Model& model, const Reference& ref) {
  const double flops = *model.flops_per_sample();
  const double expected = ref.all.toGenericDict().at("flops").toDouble();
  EXPECT_NEAR(flops / expected, 1.0, 0.02) << flops << " vs flop_counter's " << expected;
}

TEST(VitParity, TinyAtImage32Patch8MatchesTorchvision) {
  RUNNER_REQUIRE_ORACLE("torch,torchvision");
  const std::int64_t classes = 10;
  const Reference ref = reference("ti", {"--config", "ti", "--image", "32", "--patch", "8",
                                   "--classes", std::to_string(classes)});
  runner::PluginHost host;
  host.load(kBuiltins);
  at::set_num_threads(1);
  auto model = make_vit(host, "ti", 8, images(32, 32, classes));
  torch::nn::Module& module = model->module();

  // Names and shapes: exactly torchvision's state dict.
  const auto state = ref.tensors("state");
  std::map<std::string, std::vector<std::int64_t>> ours, theirs;
  for (const auto& [name, t] : state_of(module)) ours[name] = t.sizes().vec();
  for (const auto& [name, t] : state) theirs[name] = t.sizes().vec();
  ASSERT_EQ(ours, theirs);
  EXPECT_EQ(model->parameter_count(), ref.integer("params"));
  expect_flops_near(*model, ref);

  load(module, state);
  runner::Batch batch;
  batch.inputs = ref.get("x");
  batch.targets = ref.get("targets");
  batch.size = batch.inputs.size(0);
  module.eval();
  {
    torch::NoGradGuard no_grad;
    expect_close(model->forward(batch), ref.get("eval_out"), "eval-mode logits");
  }
  // Train mode (dropout 0, so the same function with autograd): 5 SGD steps
  // must land on torchvision's parameters.
  module.train();
  torch::optim::SGD sgd(module.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    const torch::Tensor out = model->forward(batch);
    if (step == 0) expect_close(out.detach(), ref.get("train_out"), "train-mode logits");
    model->loss(out, batch).backward();
    sgd.step();
  }
  const auto after = ref.tensors("after");
  for (const auto& [name, tensor] : state_of(module))
    EXPECT_TRUE(tensor.allclose(after.at(name), kStepsRtol, kStepsAtol))
        << name << " after 5 SGD steps: max |difference| "
        << (tensor - after.at(name)).abs().max().item<double>();
}

TEST(Vit, VitB16At224HasTorchvisionsParametersAndFlopCountersFlops) {
  runner::PluginHost host;
  host.load(kBuiltins);
  // Built only, no forward at this size.
  auto model = make_vit(host, "b", 16, images(224, 224, 1000));
  // torchvision's documented size of vit_b_16 (ImageNet, 1000 classes).
  EXPECT_EQ(model->parameter_count(), 86567656);
  RUNNER_REQUIRE_ORACLE("torch,torchvision");
  // torchvision's model on the meta device: the count without the arithmetic.
  const Reference ref = reference("b16", {"--config", "b", "--image", "224", "--patch", "16",
                                          "--classes", "1000", "--meta"});
  EXPECT_EQ(model->parameter_count(), ref.integer("params"));
  expect_flops_near(*model, ref);
}

TEST(Vit, InitialisationIsTorchvisions) {
  // Seeded: the spreads below are statistics of one draw (mlp.3.bias has only
  // 384 values, so an unseeded draw missed the 10 % band about once in 200).
  torch::manual_seed(0);
  runner::PluginHost host;
  host.load(kBuiltins);
  auto model = make_vit(host, "s", 16, images(64, 64, 10));
  const auto state = state_of(model->module());
  auto all_equal = [&](const std::string& name, double value) {
    return state.at(name).eq(value).all().item<bool>();
  };
  EXPECT_TRUE(all_equal("class_token", 0));
  EXPECT_TRUE(all_equal("heads.head.weight", 0));
  EXPECT_TRUE(all_equal("heads.head.bias", 0));
  EXPECT_TRUE(all_equal("conv_proj.bias", 0));
  EXPECT_TRUE(all_equal("encoder.ln.weight", 1));
  EXPECT_TRUE(all_equal("encoder.ln.bias", 0));
  const std::string block = "encoder.layers.encoder_layer_11.";
  EXPECT_TRUE(all_equal(block + "ln_1.weight", 1));
  EXPECT_TRUE(all_equal(block + "ln_2.bias", 0));
  EXPECT_TRUE(all_equal(block + "self_attention.in_proj_bias", 0));
  EXPECT_TRUE(all_equal(block + "self_attention.out_proj.bias", 0));
  // Spreads, within 10 % of the target (hundreds of thousands of draws).
  auto std_of = [&](const std::string& name) { return state.at(name).std().item<double>(); };
  EXPECT_NEAR(std_of("encoder.pos_embedding"), 0.02, 0.002);
  const double conv_std = std::sqrt(1.0 / (3 * 16 * 16));  // truncated normal, 1/sqrt(fan_in)
  EXPECT_NEAR(std_of("conv_proj.weight"), conv_std, conv_std / 10);
  // Xavier uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out)), std a / sqrt(3).
  const double in_proj = std::sqrt(6.0 / (384 + 3 * 384));
  EXPECT_NEAR(std_of(block + "self_attention.in_proj_weight"), in_proj / std::sqrt(3.0),
              in_proj / std::sqrt(3.0) / 10);
  EXPECT_LE(state.at(block + "self_attention.in_proj_weight").abs().max().item<double>(), in_proj);
  const double mlp = std::sqrt(6.0 / (384 + 1536));
  EXPECT_NEAR(std_of(block + "mlp.0.weight"), mlp / std::sqrt(3.0), mlp / std::sqrt(3.0) / 10);
  EXPECT_NEAR(std_of(block + "mlp.3.bias"), 1e-6, 1e-7);
  // out_proj keeps Linear's default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  EXPECT_LE(state.at(block + "self_attention.out_proj.weight").abs().max().item<double>(),
            1.0 / std::sqrt(384.0));
}

TEST(Vit, DropoutActsOnlyInTraining) {
  runner::PluginHost host;
  host.load(kBuiltins);
  auto model = make_vit(host, "ti", 8, images(32, 32, 10), 0, 0, /*dropout=*/0.5);
  {  // the head starts at zero: give it weights, or every output is 0
    torch::NoGradGuard no_grad;
    state_of(model->module()).at("heads.head.weight").normal_(0, 0.1);
  }
  const runner::Batch batch = model->example_batch(2, torch::kCPU);
  torch::NoGradGuard no_grad;
  model->module().eval();
  EXPECT_TRUE(model->forward(batch).equal(model->forward(batch)));
  model->module().train();
  EXPECT_FALSE(model->forward(batch).equal(model->forward(batch)));
}

// The ATen operators a forward dispatches, counted by name through a
// RecordFunction callback (a plain function pointer: the counts are global).
std::map<std::string, int>& op_counts() {
  static std::map<std::string, int> counts;
  return counts;
}

std::map<std::string, int> ops_of(const std::function<void()>& body) {
  op_counts().clear();
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                     -> std::unique_ptr<at::ObserverContext> {
        ++op_counts()[fn.name()];
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  body();
  at::removeCallback(handle);
  return op_counts();
}

// torchvision's layers call at::linear (F.linear), which adds the bias inside
// the matrix product (addmm) for [batch, tokens, in]; torch::nn::Linear's C++
// forward would run matmul and then add_ the bias, a second pass over every
// projection's output and an extra node in backward (issue 30, as gpt2).
TEST(Vit, ProjectionsAreAddmmAsInTorchvision) {
  runner::PluginHost host;
  host.load(kBuiltins);
  auto model = make_vit(host, "ti", 8, images(32, 32, 10));
  const std::int64_t layers = 12;  // ti
  const runner::Batch batch = model->example_batch(2, torch::kCPU);
  const auto ops = ops_of([&] { (void)model->forward(batch); });
  auto count = [&](const std::string& name) {
    const auto it = ops.find(name);
    return it == ops.end() ? 0 : it->second;
  };
  // in_proj, out_proj, mlp.0 and mlp.3 per layer, and the head
  EXPECT_EQ(count("aten::linear"), 4 * layers + 1);
  EXPECT_EQ(count("aten::addmm"), 4 * layers + 1);
  EXPECT_EQ(count("aten::matmul"), 0);
  EXPECT_EQ(count("aten::add_"), 0);
}

TEST(Vit, ImagesOfTheWrongShapeAndBadOptionsAreClearErrors) {
  runner::PluginHost host;
  host.load(kBuiltins);
  const std::string library = host.library_of(runner::PluginKind::model, "vit").path;
  const std::string prefix = "model plugin 'vit' (" + library + ") failed: ";
  // Options that do not fit the data name the option (also checked before any run).
  const auto refused = [&](const std::string& option) {
    return "model plugin 'vit' (" + library + ") refused option '" + option + "': ";
  };
  runner::ModelContext grey = images(32, 32, 10);
  grey.input_shape = {1, 32, 32};
  EXPECT_THROW_MSG((void)make_vit(host, "ti", 8, grey), runner::Error,
                   prefix + "needs RGB image samples [3, height, width]; set the loader's "
                            "shape, e.g. shape = [3, 224, 224]");
  EXPECT_THROW_MSG((void)make_vit(host, "ti", 8, images(32, 48, 10)), runner::Error,
                   prefix + "needs square images; the loader's are 32x48 (height x width): "
                            "set the loader's shape to [3, S, S]");
  EXPECT_THROW_MSG((void)make_vit(host, "ti", 16, images(40, 40, 10)), runner::Error,
                   refused("patch_size") + "image size 40 is not divisible by patch_size = 16; choose a patch "
                            "size that divides it or resize the loader's images");
  EXPECT_THROW_MSG((void)make_vit(host, "ti", 8, images(32, 32, 10), 5), runner::Error,
                   refused("num_classes") + "num_classes = 5 is fewer than the loader's 10 classes; raise it or "
                            "leave it at 0 (the loader's)");
  EXPECT_THROW_MSG((void)make_vit(host, "ti", 16, images(32, 32, 10), 0, 224), runner::Error,
                   refused("image_size") + "image_size = 224 differs from the loader's 32x32 images; leave it "
                            "at 0 (the loader's) or set the loader's shape to [3, 224, 224]");
  // The loader's own size, spelt out, is accepted.
  EXPECT_NO_THROW((void)make_vit(host, "ti", 16, images(32, 32, 10), 0, 32));
  // A batch of another size than the model was built for.
  auto model = make_vit(host, "ti", 8, images(32, 32, 10));
  runner::Batch wrong;
  wrong.inputs = torch::zeros({1, 3, 64, 64});
  wrong.targets = torch::zeros({1}, torch::kLong);
  wrong.size = 1;
  torch::NoGradGuard no_grad;
  EXPECT_THROW_MSG((void)model->forward(wrong), runner::Error,
                   "model plugin 'vit' (" + library + ") failed in forward: expected images "
                   "[batch, 3, 32, 32], got [1, 3, 64, 64]");
}

}  // namespace
