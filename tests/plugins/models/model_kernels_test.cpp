// Custom ops inside the transformer_lm (gpt2, llama) and vit models: the
// options norm_op and activation_op name an op that the model looks up in
// LibTorch's dispatcher when it is built, checks, and calls in forward.
//
// The ops registered below (namespace test_ops) compute the same functions
// as ATen's LayerNorm, RMSNorm and GELU by other formulas (composite ATen,
// so autograd differentiates them), and count their calls, so the tests see
// that the model calls them. From the same weights (randomised, so no bias
// is zero and no norm scale one), each model's output and every parameter's
// gradient through the op equal those of the ATen path within float32
// tolerance. Other ops exercise every refusal, with its exact message. The
// built-in kernels plugin's runner:: ops are checked the same way.
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <runner/sdk.hpp>

#include "../../../plugins/models/common/custom_ops.hpp"
#include "runner/host/host.hpp"
#include "support/module_state.hpp"

namespace {

namespace fs = std::filesystem;
using Values = std::map<std::string, runner::OptionValue>;
using runner::test::state_of;

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

// Calls of each test op since the last reset.
std::atomic<int> layernorm_calls{0}, rmsnorm_calls{0}, bias_gelu_calls{0};

// LayerNorm through the centred second moment (ATen's kernel uses Welford's
// running moments: another summation).
at::Tensor explicit_layernorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              double eps) {
  ++layernorm_calls;
  const at::Tensor centred = x - x.mean(-1, true);
  return centred * at::rsqrt(centred.square().mean(-1, true) + eps) * weight + bias;
}

at::Tensor explicit_rmsnorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  ++rmsnorm_calls;
  return x / at::sqrt(x.square().mean(-1, true) + eps) * weight;
}

// GELU by its formulas: x Phi(x) through erf, or GPT-2's tanh approximation.
at::Tensor explicit_bias_gelu(const at::Tensor& x, const at::Tensor& bias,
                              c10::string_view approximate) {
  ++bias_gelu_calls;
  const at::Tensor y = x + bias;
  if (approximate == "tanh")
    return 0.5 * y * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (y + 0.044715 * y.pow(3))));
  TORCH_CHECK(approximate == "none", "approximate must be \"none\" or \"tanh\"");
  return 0.5 * y * (1 + at::erf(y * M_SQRT1_2));
}

at::Tensor string_bias_gelu(const at::Tensor& x, const at::Tensor& bias,
                            const std::string& approximate) {
  return at::gelu(x + bias, approximate);
}

TORCH_LIBRARY_FRAGMENT(test_ops, m) {
  // m.def with a function: a CompositeImplicitAutograd kernel.
  m.def("layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor",
        &explicit_layernorm);
  m.def("rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor", &explicit_rmsnorm);
  m.def("bias_gelu(Tensor x, Tensor bias, str approximate=\"none\") -> Tensor",
        &explicit_bias_gelu);
  // A CPU kernel only: no CUDA kernel, no autograd kernel.
  m.def("cpu_layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor");
  m.impl("cpu_layernorm", c10::DispatchKey::CPU, TORCH_FN(explicit_layernorm));
  // Writes to x; no kernel needed to be refused.
  m.def("layernorm_(Tensor(a!) x, Tensor weight, Tensor bias, float eps) -> Tensor(a!)");
  // The right schema, a kernel taking str as std::string.
  m.def("string_bias_gelu(Tensor x, Tensor bias, str approximate) -> Tensor", &string_bias_gelu);
}

void reset_calls() {
  layernorm_calls = 0;
  rmsnorm_calls = 0;
  bias_gelu_calls = 0;
}

runner::ModelContext tokens(std::int64_t seq_len, std::int64_t vocab, bool training = true) {
  runner::ModelContext context;
  context.input_shape = {seq_len};
  context.num_classes = vocab;
  context.training = training;
  return context;
}

runner::ModelContext images(std::int64_t side, std::int64_t classes) {
  runner::ModelContext context;
  context.input_shape = {3, side, side};
  context.num_classes = classes;
  context.training = true;
  return context;
}

// Small models: gpt2 and llama of width 64, depth 2, 4 heads (llama: 2
// key/value heads) over 16 tokens of 97; vit ti at 32x32, patch 8.
Values gpt2(Values extra = {}) {
  Values v{{"flavour", std::string("gpt2")}, {"width", std::int64_t{64}},
           {"depth", std::int64_t{2}},       {"heads", std::int64_t{4}}};
  v.insert(extra.begin(), extra.end());
  return v;
}
Values llama(Values extra = {}) {
  Values v = gpt2(std::move(extra));
  v["flavour"] = std::string("llama");
  v["kv_heads"] = std::int64_t{2};
  v["multiple_of"] = std::int64_t{32};
  return v;
}
Values vit(Values extra = {}) {
  Values v{{"config", std::string("ti")}, {"patch_size", std::int64_t{8}}};
  v.insert(extra.begin(), extra.end());
  return v;
}

class ModelKernels : public ::testing::Test {
 public:
  void SetUp() override {
    torch::manual_seed(0);
    at::set_num_threads(1);
    for (const char* plugin : {"transformer_lm", "vit"})
      host_.load(kBuiltins / ("runner_plugin_" + std::string(plugin) + ".so"));
    reset_calls();
  }
  std::unique_ptr<runner::Model> make(const std::string& plugin, Values options,
                                      const runner::ModelContext& context) {
    return host_.make_model(plugin, runner::Options(std::move(options)), context);
  }
  // The option and the plugin's message of the OptionError the factory
  // throws ("" when it throws none).
  std::pair<std::string, std::string> refusal(const std::string& plugin, Values options,
                                              const runner::ModelContext& context) {
    try {
      (void)make(plugin, std::move(options), context);
    } catch (const runner::PluginOptionError& e) {
      return {e.option(), e.detail()};
    }
    return {};
  }
  runner::PluginHost host_;
};

// float32: ATen's kernels and the ops' formulas round differently.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected,
                  const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(actual.allclose(expected, kRtol, kAtol))
      << what << ": max |difference| " << (actual - expected).abs().max().item<double>();
}

// `custom` (the same architecture with custom ops) against `aten`: the same
// state dict names and shapes; from aten's weights, randomised first, the
// same training-mode output and loss, and the same gradient of every
// parameter. Returns the largest difference of the outputs.
double expect_same_model(runner::Model& aten, runner::Model& custom, const runner::Batch& batch) {
  std::map<std::string, std::vector<std::int64_t>> ours, theirs;
  for (const auto& [name, t] : state_of(aten.module())) theirs[name] = t.sizes().vec();
  for (const auto& [name, t] : state_of(custom.module())) ours[name] = t.sizes().vec();
  EXPECT_EQ(ours, theirs);
  if (ours != theirs) return 0;
  {
    torch::NoGradGuard no_grad;
    auto target = state_of(custom.module());
    for (auto& [name, t] : state_of(aten.module())) {
      if (t.is_floating_point()) t.add_(torch::randn_like(t), 0.1);
      target.at(name).copy_(t);
    }
  }
  aten.module().train();
  custom.module().train();
  const torch::Tensor expected = aten.forward(batch), actual = custom.forward(batch);
  expect_close(actual, expected, "output");
  const torch::Tensor expected_loss = aten.loss(expected, batch);
  const torch::Tensor actual_loss = custom.loss(actual, batch);
  expect_close(actual_loss, expected_loss, "loss");
  expected_loss.backward();
  actual_loss.backward();
  auto grads = state_of(custom.module());
  for (const auto& p : aten.module().named_parameters())
    expect_close(grads.at(p.key()).grad(), p.value().grad(), "gradient of " + p.key());
  return (actual - expected).abs().max().item<double>();
}

// ---------------------------------------------------------------------------
// The models through the test ops.

TEST_F(ModelKernels, Gpt2ThroughLayernormAndBiasGeluOpsIsTheAtenModel) {
  auto aten = make("transformer_lm", gpt2(), tokens(16, 97));
  auto custom = make("transformer_lm",
                     gpt2({{"norm_op", std::string("test_ops::layernorm")},
                           {"activation_op", std::string("test_ops::bias_gelu")}}),
                     tokens(16, 97));
  const runner::Batch batch = aten->example_batch(3, torch::kCPU);
  reset_calls();
  expect_same_model(*aten, *custom, batch);
  // One forward: ln_1 and ln_2 of two blocks and ln_f; one MLP per block.
  EXPECT_EQ(layernorm_calls, 5);
  EXPECT_EQ(bias_gelu_calls, 2);
}

TEST_F(ModelKernels, Gpt2WithOneOpAndTheOtherFromAten) {
  for (const auto& [option, op] : {std::pair{"norm_op", "test_ops::layernorm"},
                                   std::pair{"activation_op", "test_ops::bias_gelu"}}) {
    SCOPED_TRACE(option);
    auto aten = make("transformer_lm", gpt2(), tokens(16, 97));
    auto custom = make("transformer_lm", gpt2({{option, std::string(op)}}), tokens(16, 97));
    reset_calls();
    expect_same_model(*aten, *custom, aten->example_batch(2, torch::kCPU));
    EXPECT_EQ(layernorm_calls, std::string(option) == "norm_op" ? 5 : 0);
    EXPECT_EQ(bias_gelu_calls, std::string(option) == "activation_op" ? 2 : 0);
  }
}

TEST_F(ModelKernels, Gpt2WithCheckpointedBlocksCallsTheOpsAgainInBackward) {
  auto aten = make("transformer_lm", gpt2(), tokens(16, 97));
  auto custom = make("transformer_lm",
                     gpt2({{"norm_op", std::string("test_ops::layernorm")},
                           {"activation_op", std::string("test_ops::bias_gelu")},
                           {"checkpoint", std::string("blocks")}}),
                     tokens(16, 97));
  reset_calls();
  expect_same_model(*aten, *custom, aten->example_batch(2, torch::kCPU));
  // The blocks' four norms and two MLPs run again in backward; ln_f does not.
  EXPECT_EQ(layernorm_calls, 9);
  EXPECT_EQ(bias_gelu_calls, 4);
}

TEST_F(ModelKernels, LlamaThroughAnRmsnormOpIsTheAtenModel) {
  auto aten = make("transformer_lm", llama(), tokens(16, 97));
  auto custom =
      make("transformer_lm", llama({{"norm_op", std::string("test_ops::rmsnorm")}}), tokens(16, 97));
  const runner::Batch batch = aten->example_batch(3, torch::kCPU);
  reset_calls();
  expect_same_model(*aten, *custom, batch);
  EXPECT_EQ(rmsnorm_calls, 5);  // two per layer and model.norm
}

TEST_F(ModelKernels, VitThroughLayernormAndBiasGeluOpsIsTheAtenModel) {
  auto aten = make("vit", vit(), images(32, 10));
  auto custom = make("vit",
                     vit({{"norm_op", std::string("test_ops::layernorm")},
                          {"activation_op", std::string("test_ops::bias_gelu")}}),
                     images(32, 10));
  const runner::Batch batch{torch::randn({2, 3, 32, 32}), torch::tensor({1, 7}), 2};
  reset_calls();
  expect_same_model(*aten, *custom, batch);
  EXPECT_EQ(layernorm_calls, 25);  // ln_1 and ln_2 of 12 layers and encoder.ln
  EXPECT_EQ(bias_gelu_calls, 12);
}

TEST_F(ModelKernels, VitKeepsItsMlpDropoutsWithTheOp) {
  // Dropout 0.5 in the MLP (mlp.2 and mlp.4): the same seed draws the same
  // masks on both paths, so training outputs still agree; in eval mode the
  // dropouts are off.
  auto aten = make("vit", vit({{"dropout", 0.5}}), images(32, 10));
  auto custom = make("vit",
                     vit({{"dropout", 0.5}, {"activation_op", std::string("test_ops::bias_gelu")}}),
                     images(32, 10));
  {
    torch::NoGradGuard no_grad;
    auto target = state_of(custom->module());
    for (auto& [name, t] : state_of(aten->module())) {
      t.add_(torch::randn_like(t), 0.1);
      target.at(name).copy_(t);
    }
  }
  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  const runner::Batch batch{x, torch::tensor({1, 7}), 2};
  aten->module().train();
  custom->module().train();
  torch::manual_seed(5);
  const torch::Tensor expected = aten->forward(batch);
  torch::manual_seed(5);
  expect_close(custom->forward(batch), expected, "training output with dropout");
  torch::manual_seed(6);
  EXPECT_FALSE(custom->forward(batch).allclose(expected, kRtol, kAtol))
      << "other dropout masks should change the output";
  aten->module().eval();
  custom->module().eval();
  torch::NoGradGuard no_grad;
  expect_close(custom->forward(batch), aten->forward(batch), "eval output");
}

TEST_F(ModelKernels, AnOpWithoutAutogradServesInference) {
  auto model = make("transformer_lm", gpt2({{"norm_op", std::string("test_ops::cpu_layernorm")}}),
                    tokens(16, 97, /*training=*/false));
  torch::NoGradGuard no_grad;
  reset_calls();
  const torch::Tensor logits = model->forward(model->example_batch(2, torch::kCPU));
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{2, 16, 97}));
  EXPECT_EQ(layernorm_calls, 5);
}

TEST_F(ModelKernels, StateDictsLoadAcrossTheOptions) {
  // Weights saved without the ops load by name into a model with them, and
  // back: the options change what forward calls, not what the module holds.
  for (const auto& [plugin, plain, with_ops, context] :
       {std::tuple{"transformer_lm", gpt2(),
                   gpt2({{"norm_op", std::string("test_ops::layernorm")},
                         {"activation_op", std::string("test_ops::bias_gelu")}}),
                   tokens(16, 97)},
        std::tuple{"transformer_lm", llama(), llama({{"norm_op", std::string("test_ops::rmsnorm")}}),
                   tokens(16, 97)},
        std::tuple{"vit", vit(),
                   vit({{"norm_op", std::string("test_ops::layernorm")},
                        {"activation_op", std::string("test_ops::bias_gelu")}}),
                   images(32, 10)}}) {
    SCOPED_TRACE(plugin);
    auto a = make(plugin, plain, context);
    auto b = make(plugin, with_ops, context);
    std::vector<std::string> names_a, names_b;  // registration order, as a state dict's
    for (const auto& p : a->module().named_parameters()) names_a.push_back(p.key());
    for (const auto& p : b->module().named_parameters()) names_b.push_back(p.key());
    EXPECT_EQ(names_a, names_b);
    EXPECT_EQ(a->parameter_count(), b->parameter_count());
    EXPECT_EQ(a->tied_parameters(), b->tied_parameters());
    EXPECT_EQ(a->flops_per_sample(), b->flops_per_sample());
  }
}

TEST_F(ModelKernels, ProvenanceNamesTheOpsAndWhereTheyWereRegistered) {
  auto aten = make("transformer_lm", gpt2(), tokens(16, 97));
  EXPECT_TRUE(aten->provenance().empty());
  auto custom = make("transformer_lm",
                     gpt2({{"norm_op", std::string("test_ops::layernorm")},
                           {"activation_op", std::string("test_ops::bias_gelu")}}),
                     tokens(16, 97));
  const auto facts = custom->provenance();
  ASSERT_EQ(facts.size(), 2U);
  const std::string norm = facts.at("norm_op"), activation = facts.at("activation_op");
  const std::string here = "registered at " + std::string(__FILE__) + ":";
  EXPECT_EQ(norm.substr(0, norm.find(here)),
            "test_ops::layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor, ");
  EXPECT_NE(norm.find(here), std::string::npos) << norm;
  EXPECT_EQ(activation.substr(0, activation.find(here)),
            "test_ops::bias_gelu(Tensor x, Tensor bias, str approximate=\"none\") -> Tensor, ");

  auto llama_model =
      make("transformer_lm", llama({{"norm_op", std::string("test_ops::rmsnorm")}}), tokens(16, 97));
  ASSERT_EQ(llama_model->provenance().size(), 1U);
  EXPECT_EQ(llama_model->provenance().at("norm_op").rfind("test_ops::rmsnorm(", 0), 0U);
  auto vit_model = make("vit", vit({{"activation_op", std::string("test_ops::bias_gelu")}}),
                        images(32, 10));
  ASSERT_EQ(vit_model->provenance().size(), 1U);
  EXPECT_EQ(vit_model->provenance().at("activation_op").rfind("test_ops::bias_gelu(", 0), 0U);
}

TEST_F(ModelKernels, TheOptionsAreDeclaredAsAddedLaterWithEmptyDefaults) {
  // Added later: recorded trials that leave them empty keep their config hash.
  for (const char* plugin : {"transformer_lm", "vit"})
    for (const char* option : {"norm_op", "activation_op"}) {
      SCOPED_TRACE(std::string(plugin) + "." + option);
      const runner::PluginDescriptor* descriptor = host_.find(runner::PluginKind::model, plugin);
      ASSERT_NE(descriptor, nullptr);
      const runner::OptionSpec* spec = descriptor->schema.find(option);
      ASSERT_NE(spec, nullptr);
      EXPECT_EQ(spec->type, runner::OptionType::string);
      EXPECT_TRUE(spec->added_later);
      ASSERT_TRUE(spec->default_value.has_value());
      EXPECT_EQ(std::get<std::string>(*spec->default_value), "");
    }
}

// ---------------------------------------------------------------------------
// Refusals, each at its option, with its exact message.

using Refusal = std::pair<std::string, std::string>;

TEST_F(ModelKernels, MalformedAndUnregisteredOpNamesAreRefused) {
  const std::string malformed_hint =
      "' is not an op name: write \"namespace::name\" or \"namespace::name.overload\", e.g. ";
  for (const char* name : {"layernorm", "::layernorm", "test_ops::", "test ops::layernorm",
                           "test_ops::layernorm.", "test_ops::layer-norm", "a::b::c"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string(name)}}), tokens(16, 97)),
              (Refusal{"norm_op", "'" + std::string(name) + malformed_hint +
                                      "\"runner::layernorm\""}));
  }
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"activation_op", std::string("bias_gelu")}}),
                    tokens(16, 97)),
            (Refusal{"activation_op", "'bias_gelu" + malformed_hint + "\"runner::bias_gelu\""}));
  EXPECT_EQ(
      refusal("transformer_lm", llama({{"norm_op", std::string("rmsnorm")}}), tokens(16, 97)),
      (Refusal{"norm_op", "'rmsnorm" + malformed_hint + "\"runner::rmsnorm\""}));

  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("nowhere::layernorm")}}),
                    tokens(16, 97)),
            (Refusal{"norm_op",
                     "op 'nowhere::layernorm' is not registered: no loaded library defines it; "
                     "load the kernel plugin that does (`runner plugins` lists the loaded "
                     "plugins; runner::layernorm is the built-in kernels plugin's), or leave "
                     "norm_op empty for ATen's layer_norm"}));
  // A known op under an overload it does not have.
  EXPECT_EQ(refusal("vit", vit({{"activation_op", std::string("test_ops::bias_gelu.out")}}),
                    images(32, 10)),
            (Refusal{"activation_op",
                     "op 'test_ops::bias_gelu.out' is not registered: no loaded library defines "
                     "it; load the kernel plugin that does (`runner plugins` lists the loaded "
                     "plugins; runner::bias_gelu is the built-in kernels plugin's), or leave "
                     "activation_op empty for ATen's gelu after the Linear's bias"}));
  EXPECT_EQ(refusal("transformer_lm", llama({{"norm_op", std::string("nowhere::rmsnorm")}}),
                    tokens(16, 97))
                .second,
            "op 'nowhere::rmsnorm' is not registered: no loaded library defines it; load the "
            "kernel plugin that does (`runner plugins` lists the loaded plugins; "
            "runner::rmsnorm is the built-in kernels plugin's), or leave norm_op empty for the "
            "model's RMSNorm in ATen ops");
}

TEST_F(ModelKernels, OpsOfAnotherSchemaAreRefusedNamingBothSchemas) {
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("test_ops::rmsnorm")}}),
                    tokens(16, 97)),
            (Refusal{"norm_op",
                     "op 'test_ops::rmsnorm' does not have the schema norm_op needs: expected "
                     "(Tensor, Tensor, Tensor, float) -> Tensor (x, weight, bias, eps, as "
                     "runner::layernorm), found (Tensor, Tensor, float) -> Tensor "
                     "(test_ops::rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor)"}));
  EXPECT_EQ(refusal("transformer_lm", llama({{"norm_op", std::string("test_ops::layernorm")}}),
                    tokens(16, 97)),
            (Refusal{"norm_op",
                     "op 'test_ops::layernorm' does not have the schema norm_op needs: expected "
                     "(Tensor, Tensor, float) -> Tensor (x, weight, eps, as runner::rmsnorm), "
                     "found (Tensor, Tensor, Tensor, float) -> Tensor (test_ops::layernorm(Tensor "
                     "x, Tensor weight, Tensor bias, float eps) -> Tensor)"}));
  EXPECT_EQ(refusal("vit", vit({{"activation_op", std::string("test_ops::layernorm")}}),
                    images(32, 10)),
            (Refusal{"activation_op",
                     "op 'test_ops::layernorm' does not have the schema activation_op needs: "
                     "expected (Tensor, Tensor, str) -> Tensor (x, bias, approximate, as "
                     "runner::bias_gelu), found (Tensor, Tensor, Tensor, float) -> Tensor "
                     "(test_ops::layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> "
                     "Tensor)"}));
  // An ATen operator is looked up like any other, and refused by its schema.
  EXPECT_EQ(refusal("vit", vit({{"norm_op", std::string("aten::layer_norm")}}), images(32, 10)),
            (Refusal{"norm_op",
                     "op 'aten::layer_norm' does not have the schema norm_op needs: expected "
                     "(Tensor, Tensor, Tensor, float) -> Tensor (x, weight, bias, eps, as "
                     "runner::layernorm), found (Tensor, SymInt[], Tensor?, Tensor?, float, bool) "
                     "-> Tensor (aten::layer_norm(Tensor input, SymInt[] normalized_shape, "
                     "Tensor? weight=None, Tensor? bias=None, float eps=1.0000000000000001e-05, "
                     "bool cudnn_enable=True) -> Tensor)"}));
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("test_ops::layernorm_")}}),
                    tokens(16, 97)),
            (Refusal{"norm_op",
                     "op 'test_ops::layernorm_' writes to its arguments "
                     "(test_ops::layernorm_(Tensor(a!) x, Tensor weight, Tensor bias, float eps) "
                     "-> Tensor(a!)); norm_op needs a functional op like runner::layernorm"}));
}

TEST_F(ModelKernels, OpsWithoutAKernelForTheRunAreRefused) {
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("test_ops::cpu_layernorm")}}),
                    tokens(16, 97, /*training=*/true)),
            (Refusal{"norm_op",
                     "op 'test_ops::cpu_layernorm' has no autograd kernel, so a training run "
                     "cannot compute gradients through it; register one (Autograd or "
                     "CompositeImplicitAutograd), or leave norm_op empty for ATen's layer_norm"}));
  runner::ModelContext on_gpu = tokens(16, 97, /*training=*/false);
  on_gpu.device = torch::Device(torch::kCUDA, 0);
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("test_ops::cpu_layernorm")}}),
                    on_gpu),
            (Refusal{"norm_op",
                     "op 'test_ops::cpu_layernorm' has no kernel for cuda:0, the run's device; "
                     "run on a device it supports, or leave norm_op empty for ATen's "
                     "layer_norm"}));
  // A composite op runs on every device.
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("test_ops::layernorm")}}),
                    on_gpu),
            Refusal{});
}

TEST_F(ModelKernels, AKernelOfAnotherCppSignatureIsRefused) {
  // The schema matches; the kernel takes str as std::string, which the
  // dispatcher's typed handle refuses (the names are the compiler's).
  const std::string called =
      c10::impl::CppSignature::make<runner_models::ops::BiasGeluFn>().name();
  const std::string registered =
      c10::impl::CppSignature::make<decltype(string_bias_gelu)>().name();
  EXPECT_EQ(refusal("transformer_lm",
                    gpt2({{"activation_op", std::string("test_ops::string_bias_gelu")}}),
                    tokens(16, 97)),
            (Refusal{"activation_op",
                     "op 'test_ops::string_bias_gelu' has a kernel whose C++ signature is " +
                         registered + ", not " + called +
                         "; register its kernels with the types ATen's operators take (float "
                         "as double, str as c10::string_view)"}));
  EXPECT_NE(registered, called);
}

TEST_F(ModelKernels, LlamaHasNoActivationOpToReplace) {
  EXPECT_EQ(refusal("transformer_lm", llama({{"activation_op", std::string("test_ops::bias_gelu")}}),
                    tokens(16, 97)),
            (Refusal{"activation_op",
                     "the llama flavour's MLP is SwiGLU (silu(gate_proj(x)) * up_proj(x), no "
                     "bias): it has no GELU for activation_op = \"test_ops::bias_gelu\" to "
                     "replace; leave activation_op empty"}));
}

TEST_F(ModelKernels, TheHostReportsARefusalAsTheModelsOption) {
  try {
    (void)make("transformer_lm", gpt2({{"norm_op", std::string("nowhere::layernorm")}}),
               tokens(16, 97));
    ADD_FAILURE() << "expected a PluginOptionError";
  } catch (const runner::PluginOptionError& e) {
    EXPECT_EQ(e.plugin_kind(), runner::PluginKind::model);
    EXPECT_EQ(std::string(e.what()).rfind("model plugin 'transformer_lm' (", 0), 0U) << e.what();
    EXPECT_NE(std::string(e.what()).find(") refused option 'norm_op': op 'nowhere::layernorm'"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------
// The built-in kernels plugin's ops (runner_plugin_kernels.so, loaded as the
// host loads any plugin library).

// Counts the dispatcher's calls of each operator on this thread while it
// lives (at::RecordFunction: the dispatcher reports every op it calls to the
// observers registered). Count under inference mode: an autograd kernel that
// calls its op again below the autograd key would report it twice.
class OpCalls {
 public:
  OpCalls() {
    counts().clear();
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              ++counts()[fn.name()];
              return nullptr;
            })
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~OpCalls() { at::removeCallback(handle_); }
  OpCalls(const OpCalls&) = delete;
  OpCalls& operator=(const OpCalls&) = delete;
  [[nodiscard]] int of(const std::string& op) const {
    const auto it = counts().find(op);
    return it == counts().end() ? 0 : it->second;
  }

 private:
  static std::map<std::string, int>& counts() {
    thread_local std::map<std::string, int> calls;
    return calls;
  }
  at::CallbackHandle handle_ = 0;
};

class RunnerOps : public ModelKernels {
 public:
  void SetUp() override {
    ModelKernels::SetUp();
    const fs::path kernels = kBuiltins / "runner_plugin_kernels.so";
    ASSERT_TRUE(fs::exists(kernels)) << kernels << " is not built";
    host_.load(kernels);
  }
};

TEST_F(RunnerOps, Gpt2ThroughRunnerLayernormAndBiasGeluIsTheAtenModel) {
  auto aten = make("transformer_lm", gpt2(), tokens(16, 97));
  auto custom = make("transformer_lm",
                     gpt2({{"norm_op", std::string("runner::layernorm")},
                           {"activation_op", std::string("runner::bias_gelu")}}),
                     tokens(16, 97));
  const runner::Batch batch = aten->example_batch(3, torch::kCPU);
  expect_same_model(*aten, *custom, batch);
  {
    const c10::InferenceMode inference;
    const OpCalls calls;
    (void)custom->forward(batch);
    EXPECT_EQ(calls.of("runner::layernorm"), 5);
    EXPECT_EQ(calls.of("runner::bias_gelu"), 2);
    EXPECT_EQ(calls.of("aten::layer_norm"), 0);
    EXPECT_EQ(calls.of("aten::gelu"), 0);
  }
  {
    const c10::InferenceMode inference;
    const OpCalls calls;
    (void)aten->forward(batch);
    EXPECT_EQ(calls.of("runner::layernorm"), 0);
    EXPECT_EQ(calls.of("aten::layer_norm"), 5);
    EXPECT_EQ(calls.of("aten::gelu"), 2);
  }
  const auto facts = custom->provenance();
  EXPECT_EQ(facts.at("norm_op").rfind(
                "runner::layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor, "
                "registered at ",
                0),
            0U)
      << facts.at("norm_op");
  EXPECT_EQ(facts.at("activation_op")
                .rfind("runner::bias_gelu(Tensor x, Tensor bias, str approximate=\"none\") -> "
                       "Tensor, registered at ",
                       0),
            0U)
      << facts.at("activation_op");
}

TEST_F(RunnerOps, LlamaThroughRunnerRmsnormIsTheAtenModel) {
  auto aten = make("transformer_lm", llama(), tokens(16, 97));
  auto custom =
      make("transformer_lm", llama({{"norm_op", std::string("runner::rmsnorm")}}), tokens(16, 97));
  const runner::Batch batch = aten->example_batch(3, torch::kCPU);
  expect_same_model(*aten, *custom, batch);
  const c10::InferenceMode inference;
  const OpCalls calls;
  (void)custom->forward(batch);
  EXPECT_EQ(calls.of("runner::rmsnorm"), 5);
  EXPECT_EQ(calls.of("aten::rsqrt"), 0);  // the ATen RMSNorm's
}

TEST_F(RunnerOps, VitThroughRunnerLayernormAndBiasGeluIsTheAtenModel) {
  auto aten = make("vit", vit(), images(32, 10));
  auto custom = make("vit",
                     vit({{"norm_op", std::string("runner::layernorm")},
                          {"activation_op", std::string("runner::bias_gelu")}}),
                     images(32, 10));
  const runner::Batch batch{torch::randn({2, 3, 32, 32}), torch::tensor({1, 7}), 2};
  expect_same_model(*aten, *custom, batch);
  const c10::InferenceMode inference;
  const OpCalls calls;
  (void)custom->forward(batch);
  EXPECT_EQ(calls.of("runner::layernorm"), 25);
  EXPECT_EQ(calls.of("runner::bias_gelu"), 12);
  EXPECT_EQ(calls.of("aten::gelu"), 0);
}

TEST_F(RunnerOps, TheOtherNormAndTheOutVariantsAreRefused) {
  EXPECT_EQ(refusal("transformer_lm", gpt2({{"norm_op", std::string("runner::rmsnorm")}}),
                    tokens(16, 97)),
            (Refusal{"norm_op",
                     "op 'runner::rmsnorm' does not have the schema norm_op needs: expected "
                     "(Tensor, Tensor, Tensor, float) -> Tensor (x, weight, bias, eps, as "
                     "runner::layernorm), found (Tensor, Tensor, float) -> Tensor "
                     "(runner::rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor)"}));
  EXPECT_EQ(refusal("transformer_lm", llama({{"norm_op", std::string("runner::layernorm")}}),
                    tokens(16, 97)),
            (Refusal{"norm_op",
                     "op 'runner::layernorm' does not have the schema norm_op needs: expected "
                     "(Tensor, Tensor, float) -> Tensor (x, weight, eps, as runner::rmsnorm), "
                     "found (Tensor, Tensor, Tensor, float) -> Tensor (runner::layernorm(Tensor "
                     "x, Tensor weight, Tensor bias, float eps) -> Tensor)"}));
  EXPECT_EQ(refusal("vit", vit({{"norm_op", std::string("runner::layernorm.out")}}),
                    images(32, 10)),
            (Refusal{"norm_op",
                     "op 'runner::layernorm.out' writes to its arguments "
                     "(runner::layernorm.out(Tensor x, Tensor weight, Tensor bias, float eps, *, "
                     "Tensor(a!) out) -> Tensor(a!)); norm_op needs a functional op like "
                     "runner::layernorm"}));
  EXPECT_EQ(refusal("transformer_lm",
                    llama({{"activation_op", std::string("runner::bias_gelu")}}), tokens(16, 97))
                .first,
            "activation_op");
}

}  // namespace
