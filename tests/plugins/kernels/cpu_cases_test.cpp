// The kernels plugin's five KernelCases on CPU, as the host will use them:
// registered by the library's entry point (called here through a recording
// Registrar, so that the test does not depend on the host's kernel runner),
// their options and defaults, ops that exist with CPU and Autograd kernels,
// check_shape's messages, make_inputs (random, seeded, never constant), the
// custom and native implementations against the float64 reference within
// the case's tolerances into NaN-poisoned outputs, gradients of the
// differentiable form, and the byte and FLOP formulas.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <boost/dll/shared_library.hpp>

#include <runner/sdk.hpp>

#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using Shape = std::vector<std::int64_t>;

const fs::path kPlugin =
    fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins" / "runner_plugin_kernels.so";

struct Registered {
  std::string help;
  runner::OptionSchema options;
  runner::KernelFactory factory;
};

// Records add_kernel; any other kind is a mistake of this library.
class RecordingRegistrar final : public runner::Registrar {
 public:
  void add_model(std::string name, std::string, runner::OptionSchema, runner::ModelFactory,
                 runner::ModelDataCheck) override {
    throw std::logic_error("unexpected model " + name);
  }
  void add_optimizer(std::string name, std::string, runner::OptionSchema,
                     runner::OptimizerFactory) override {
    throw std::logic_error("unexpected optimizer " + name);
  }
  void add_loader(std::string name, std::string, runner::OptionSchema,
                  runner::LoaderFactory) override {
    throw std::logic_error("unexpected loader " + name);
  }
  void add_kernel(std::string name, std::string help, runner::OptionSchema options,
                  runner::KernelFactory factory) override {
    if (kernels.count(name) != 0) throw std::logic_error("kernel " + name + " registered twice");
    kernels[name] = {std::move(help), std::move(options), std::move(factory)};
  }
  void add_comm_hook(std::string name, std::string, runner::OptionSchema,
                     runner::CommHookFactory) override {
    throw std::logic_error("unexpected comm hook " + name);
  }
  std::map<std::string, Registered> kernels;
};

const std::map<std::string, Registered>& registered() {
  static const boost::dll::shared_library library(kPlugin.string());
  static const std::map<std::string, Registered> kernels = [] {
    RecordingRegistrar registrar;
    library.get_alias<void(runner::Registrar&)>("runner_plugin_register")(registrar);
    return registrar.kernels;
  }();
  return kernels;
}

runner::KernelCase make(const std::string& name, std::map<std::string, runner::OptionValue> o = {}) {
  return registered().at(name).factory(runner::Options(std::move(o)));
}

const runner::OptionSpec* option(const std::string& kernel, const std::string& name) {
  for (const auto& spec : registered().at(kernel).options.specs())
    if (spec.name == name) return &spec;
  return nullptr;
}

// max|y - ref| / max|ref| in float64, as the host measures it.
double relative_error(const at::Tensor& y, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kDouble);
  return (y.to(at::kDouble) - r).abs().max().item<double>() / r.abs().max().item<double>();
}

std::vector<at::Tensor> as_f64(const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> out;
  for (const auto& t : inputs) out.push_back(t.to(at::kDouble));
  return out;
}

const std::vector<std::string> kNames = {"bias_gelu", "layernorm", "rmsnorm", "scale", "softmax"};

// Each case with its non-default options too.
std::vector<std::pair<std::string, runner::KernelCase>> every_case() {
  std::vector<std::pair<std::string, runner::KernelCase>> cases;
  for (const auto& name : kNames) cases.emplace_back(name, make(name));
  cases.emplace_back("bias_gelu tanh", make("bias_gelu", {{"approximate", std::string("tanh")}}));
  cases.emplace_back("scale -0.3", make("scale", {{"factor", -0.3}}));
  cases.emplace_back("rmsnorm eps 0.1", make("rmsnorm", {{"eps", 0.1}}));
  return cases;
}

class KernelCases : public ::testing::Test {
 public:
  void SetUp() override { torch::manual_seed(0); }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Device cpu{at::kCPU};
};

TEST_F(KernelCases, RegistersFiveKernelsWithTheirOptions) {
  std::vector<std::string> names;
  for (const auto& [name, r] : registered()) {
    names.push_back(name);
    EXPECT_FALSE(r.help.empty()) << name;
  }
  EXPECT_EQ(names, kNames);

  ASSERT_NE(option("scale", "factor"), nullptr);
  EXPECT_EQ(std::get<double>(*option("scale", "factor")->default_value), 2.5);
  ASSERT_NE(option("bias_gelu", "approximate"), nullptr);
  EXPECT_EQ(std::get<std::string>(*option("bias_gelu", "approximate")->default_value), "none");
  EXPECT_EQ(option("bias_gelu", "approximate")->choices, (std::vector<std::string>{"none", "tanh"}));
  EXPECT_EQ(std::get<double>(*option("rmsnorm", "eps")->default_value), 1e-6);
  EXPECT_EQ(std::get<double>(*option("layernorm", "eps")->default_value), 1e-5);
  EXPECT_TRUE(registered().at("softmax").options.specs().empty());
}

TEST_F(KernelCases, NameOpsThatHaveCpuAndAutogradKernels) {
  auto& dispatcher = c10::Dispatcher::singleton();
  const std::map<std::string, std::vector<std::string>> expected = {
      {"scale", {"runner::scale", "runner::scale.out"}},
      {"bias_gelu", {"runner::bias_gelu", "runner::bias_gelu.out", "runner::bias_gelu_backward"}},
      {"softmax", {"runner::softmax", "runner::softmax.out", "runner::softmax_backward"}},
      {"rmsnorm", {"runner::rmsnorm", "runner::rmsnorm.out", "runner::rmsnorm_backward"}},
      {"layernorm", {"runner::layernorm", "runner::layernorm.out", "runner::layernorm_backward"}}};
  for (const auto& name : kNames) {
    const runner::KernelCase c = make(name);
    EXPECT_EQ(c.ops, expected.at(name));
    for (const auto& qualified : c.ops) {
      SCOPED_TRACE(qualified);
      const auto dot = qualified.find('.');
      const std::string op = qualified.substr(0, dot);
      const std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
      const auto handle = dispatcher.findOp({op, overload});
      ASSERT_TRUE(handle.has_value());
      EXPECT_TRUE(handle->hasKernelForDispatchKey(c10::DispatchKey::CPU));
    }
    const auto functional = dispatcher.findOp({c.ops[0], ""});
    EXPECT_TRUE(functional->hasKernelForDispatchKey(c10::DispatchKey::Autograd));
    EXPECT_EQ(c.dtypes, (std::vector<at::ScalarType>{at::kFloat, at::kDouble, at::kBFloat16,
                                                     at::kHalf}));
    for (const auto dtype : c.dtypes) EXPECT_EQ(c.tolerance.count(dtype), 1u) << name;
  }
}

TEST_F(KernelCases, CheckShapeMessages) {
  const runner::KernelCase softmax = make("softmax");
  EXPECT_EQ(softmax.check_shape({}),
            "softmax takes a shape of rank >= 1 (rows over its last dimension), not []");
  EXPECT_EQ(softmax.check_shape({4, 0}), "softmax takes a shape of positive dimensions, not [4, 0]");
  EXPECT_EQ(softmax.check_shape({4, 8}), "");
  EXPECT_EQ(make("scale").check_shape({}),
            "scale takes a shape of rank >= 1 (rows over its last dimension), not []");
  EXPECT_EQ(make("layernorm").check_shape({0}),
            "layernorm takes a shape of positive dimensions, not [0]");
  EXPECT_EQ(make("rmsnorm").check_shape({2, 3, 4}), "");
  EXPECT_EQ(make("bias_gelu").check_shape({-1, 4}),
            "bias_gelu takes a shape of positive dimensions, not [-1, 4]");
}

TEST_F(KernelCases, MakeInputsAreRandomSeededAndShaped) {
  for (const auto& name : kNames) {
    SCOPED_TRACE(name);
    const runner::KernelCase c = make(name);
    auto first = at::make_generator<at::CPUGeneratorImpl>(3);
    auto again = at::make_generator<at::CPUGeneratorImpl>(3);
    const auto a = c.make_inputs({6, 10}, at::kBFloat16, cpu, first);
    const auto b = c.make_inputs({6, 10}, at::kBFloat16, cpu, again);
    const auto next = c.make_inputs({6, 10}, at::kBFloat16, cpu, first);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a[0].sizes(), (at::IntArrayRef{6, 10}));
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].scalar_type(), at::kBFloat16);
      if (i > 0) {
        EXPECT_EQ(a[i].sizes(), (at::IntArrayRef{10}));
      }
      EXPECT_TRUE(at::equal(a[i], b[i]));      // the generator decides
      EXPECT_FALSE(at::equal(a[i], next[i]));  // and moves on
      EXPECT_GT(a[i].to(at::kFloat).std().item<double>(), 0.3);  // not constant, not ones
      EXPECT_LT(a[i].to(at::kFloat).min().item<double>(), 0.0);  // weights too can be negative
    }
    EXPECT_EQ(c.make_output(a).sizes(), a[0].sizes());
    EXPECT_EQ(c.make_output(a).scalar_type(), at::kBFloat16);
  }
}

// What the host does before it times a case: custom and native into
// NaN-poisoned outputs, the reference on float64 copies, the case's tolerance.
TEST_F(KernelCases, CustomAndNativeMatchTheFloat64Reference) {
  for (const auto& [label, c] : every_case()) {
    for (const auto dtype : c.dtypes) {
      for (const Shape& shape : {Shape{1, 4097}, Shape{3, 5, 33}, Shape{64, 257}}) {
        SCOPED_TRACE(label + " " + c10::toString(dtype) + " " + std::to_string(shape.back()));
        const auto inputs = c.make_inputs(shape, dtype, cpu, generator);
        const at::Tensor ref = c.reference(as_f64(inputs));
        EXPECT_EQ(ref.scalar_type(), at::kDouble);
        for (const bool custom : {true, false}) {
          at::Tensor out = c.make_output(inputs);
          out.fill_(std::numeric_limits<double>::quiet_NaN());
          (custom ? c.custom : c.native)(inputs, out);
          EXPECT_FALSE(out.isnan().any().item<bool>()) << (custom ? "custom" : "native");
          EXPECT_LE(relative_error(out, ref), c.tolerance.at(dtype)) << (custom ? "custom" : "native");
        }
        // The eager form at the run's dtype, timed as "eager", is right too.
        EXPECT_LE(relative_error(c.reference(inputs), ref), c.tolerance.at(dtype));
      }
    }
  }
}

TEST_F(KernelCases, OptionsReachTheOps) {
  // bias_gelu's two forms differ by more than the float32 tolerance, and
  // each case's custom op follows its own reference.
  const auto exact = make("bias_gelu");
  const auto tanh = make("bias_gelu", {{"approximate", std::string("tanh")}});
  const auto inputs = exact.make_inputs({4, 100}, at::kFloat, cpu, generator);
  at::Tensor out = exact.make_output(inputs);
  tanh.custom(inputs, out);
  const auto f64 = as_f64(inputs);
  EXPECT_LE(relative_error(out, tanh.reference(f64)), tanh.tolerance.at(at::kFloat));
  EXPECT_GT(relative_error(out, exact.reference(f64)), 10 * exact.tolerance.at(at::kFloat));

  const auto scale = make("scale", {{"factor", -0.3}});
  const auto x = scale.make_inputs({8}, at::kDouble, cpu, generator);
  at::Tensor y = scale.make_output(x);
  scale.custom(x, y);
  EXPECT_TRUE(at::allclose(y, x[0] * -0.3, 1e-15, 0));

  const auto loose = make("rmsnorm", {{"eps", 10.0}});
  const auto tight = make("rmsnorm");
  const auto n = tight.make_inputs({2, 16}, at::kDouble, cpu, generator);
  at::Tensor a = tight.make_output(n), b = tight.make_output(n);
  loose.custom(n, a);
  tight.custom(n, b);
  EXPECT_GT(relative_error(a, b), 0.5);
}

TEST_F(KernelCases, GradientsOfTheDifferentiableFormMatchTheReference) {
  for (const auto& [label, c] : every_case()) {
    ASSERT_TRUE(c.differentiable) << label;
    for (const auto dtype : {at::kDouble, at::kFloat}) {
      SCOPED_TRACE(label + " " + c10::toString(dtype));
      auto inputs = c.make_inputs({3, 4, 65}, dtype, cpu, generator);
      auto copies = as_f64(inputs);
      for (const auto i : c.grad_inputs) {
        inputs[i].requires_grad_();
        copies[i].requires_grad_();
      }
      const at::Tensor y = c.differentiable(inputs);
      const at::Tensor g = at::randn(y.sizes(), generator, at::TensorOptions(dtype));
      y.backward(g);
      c.reference(copies).backward(g.to(at::kDouble));
      const double tolerance =
          c.grad_tolerance.count(dtype) ? c.grad_tolerance.at(dtype) : c.tolerance.at(dtype);
      for (const auto i : c.grad_inputs) {
        SCOPED_TRACE("input " + std::to_string(i));
        EXPECT_LE(relative_error(inputs[i].grad(), copies[i].grad()), tolerance);
      }
    }
  }
}

TEST_F(KernelCases, GradInputsAreTheTensorsWithGradients) {
  EXPECT_EQ(make("scale").grad_inputs, (std::vector<std::size_t>{0}));
  EXPECT_EQ(make("bias_gelu").grad_inputs, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(make("softmax").grad_inputs, (std::vector<std::size_t>{0}));
  EXPECT_EQ(make("rmsnorm").grad_inputs, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(make("layernorm").grad_inputs, (std::vector<std::size_t>{0, 1, 2}));
}

TEST_F(KernelCases, BytesAndFlops) {
  auto inputs_of = [&](const std::string& name, at::ScalarType dtype) {
    return make(name).make_inputs({4, 8}, dtype, cpu, generator);
  };
  // Inputs read once, the output written once.
  EXPECT_EQ(make("scale").bytes_moved(inputs_of("scale", at::kFloat)), 2 * 32 * 4);
  EXPECT_EQ(make("bias_gelu").bytes_moved(inputs_of("bias_gelu", at::kFloat)), (32 + 8 + 32) * 4);
  EXPECT_EQ(make("softmax").bytes_moved(inputs_of("softmax", at::kHalf)), 2 * 32 * 2);
  EXPECT_EQ(make("rmsnorm").bytes_moved(inputs_of("rmsnorm", at::kDouble)), (32 + 8 + 32) * 8);
  EXPECT_EQ(make("layernorm").bytes_moved(inputs_of("layernorm", at::kBFloat16)),
            (32 + 8 + 8 + 32) * 2);
  // docs/kernels-builtin.md: per element of x, plus per row.
  EXPECT_EQ(make("scale").flops(inputs_of("scale", at::kFloat)), 32);
  EXPECT_EQ(make("bias_gelu").flops(inputs_of("bias_gelu", at::kFloat)), 6 * 32);
  EXPECT_EQ(make("bias_gelu", {{"approximate", std::string("tanh")}})
                .flops(inputs_of("bias_gelu", at::kFloat)),
            10 * 32);
  EXPECT_EQ(make("softmax").flops(inputs_of("softmax", at::kFloat)), 5 * 32 + 4);
  EXPECT_EQ(make("rmsnorm").flops(inputs_of("rmsnorm", at::kFloat)), 4 * 32 + 3 * 4);
  EXPECT_EQ(make("layernorm").flops(inputs_of("layernorm", at::kFloat)), 7 * 32 + 4 * 4);
}

// The errors the tolerances are set from (printed for docs/kernels-builtin.md):
// the largest of three draws at a few shapes, custom vs float64 reference.
TEST_F(KernelCases, MeasuredErrorsAreBelowTheTolerances) {
  for (const auto& [label, c] : every_case()) {
    for (const auto dtype : c.dtypes) {
      double worst = 0, worst_grad = 0;
      for (int draw = 0; draw < 3; ++draw) {
        for (const Shape& shape : {Shape{32, 1024}, Shape{4, 4097}, Shape{256, 33}}) {
          auto inputs = c.make_inputs(shape, dtype, cpu, generator);
          at::Tensor out = c.make_output(inputs);
          c.custom(inputs, out);
          auto copies = as_f64(inputs);
          worst = std::max(worst, relative_error(out, c.reference(copies)));
          for (const auto i : c.grad_inputs) {
            inputs[i].requires_grad_();
            copies[i].requires_grad_();
          }
          const at::Tensor y = c.differentiable(inputs);
          const at::Tensor g = at::randn(y.sizes(), generator, at::TensorOptions(dtype));
          y.backward(g);
          c.reference(copies).backward(g.to(at::kDouble));
          for (const auto i : c.grad_inputs)
            worst_grad = std::max(worst_grad, relative_error(inputs[i].grad(), copies[i].grad()));
        }
      }
      const double grad_tolerance =
          c.grad_tolerance.count(dtype) ? c.grad_tolerance.at(dtype) : c.tolerance.at(dtype);
      std::cout << "[measured] " << label << " " << c10::toString(dtype) << " forward " << worst
                << " (tolerance " << c.tolerance.at(dtype) << ") gradient " << worst_grad
                << " (tolerance " << grad_tolerance << ")\n";
      EXPECT_LE(worst, c.tolerance.at(dtype)) << label << " " << c10::toString(dtype);
      EXPECT_LE(worst_grad, grad_tolerance) << label << " " << c10::toString(dtype);
    }
  }
}

}  // namespace
