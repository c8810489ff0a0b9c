// Kernel plugins for the tests of [kernel] experiments: one right kernel and
// kernels wrong in each way the correctness gate must catch (a wrong value,
// part of the output unwritten, a wrong gradient, constant inputs), plus
// kernels the checks before any run must refuse (one dtype only, a CUDA-only
// op, an op no library registers). Ops in namespace test_kernels, CPU only.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <runner/sdk.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// y = x * s into out; `mode` makes it wrong: 1 scales by s * 1.001, 2 writes
// only the first half of the elements.
at::Tensor& scale_out(const at::Tensor& x, double s, int64_t mode, at::Tensor& out) {
  TORCH_CHECK(out.sizes() == x.sizes(), "test_kernels::scale: out has the wrong shape");
  if (mode == 2) {
    const int64_t half = x.numel() / 2;
    out.view(-1).narrow(0, 0, half).copy_(x.reshape(-1).narrow(0, 0, half) * s);
    return out;
  }
  at::mul_out(out, x, at::scalar_tensor(mode == 1 ? s * 1.001 : s, x.options()));
  return out;
}

// d/dx (x * s) is s; `wrong` doubles it.
class ScaleFunction : public torch::autograd::Function<ScaleFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double s,
                            bool wrong) {
    ctx->saved_data["s"] = s;
    ctx->saved_data["wrong"] = wrong;
    return x * s;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const double s = ctx->saved_data["s"].toDouble();
    const bool wrong = ctx->saved_data["wrong"].toBool();
    return {grads[0] * (wrong ? 2 * s : s), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

TORCH_LIBRARY(test_kernels, m) {
  m.def("scale.out(Tensor x, float s, int mode, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("cuda_scale(Tensor x, float s) -> Tensor");
}

TORCH_LIBRARY_IMPL(test_kernels, CPU, m) { m.impl("scale.out", &scale_out); }

// A kernel for CUDA only: the CPU has none.
TORCH_LIBRARY_IMPL(test_kernels, CUDA, m) {
  m.impl("cuda_scale", [](const at::Tensor& x, double s) { return x * s; });
}

namespace {

struct ScaleOptions {
  double factor = 2.5;
};

enum class Flaw { none, wrong_value, half_written, wrong_grad, constant_inputs };

runner::KernelCase scale_case(double factor, Flaw flaw) {
  runner::KernelCase k;
  k.ops = {"test_kernels::scale.out"};
  k.dtypes = {at::kFloat, at::kDouble};
  k.tolerance = {{at::kFloat, 1e-6}, {at::kDouble, 1e-12}};
  k.check_shape = [](const std::vector<int64_t>& shape) -> std::string {
    return shape.size() <= 2 ? "" : "it takes rank 1 or 2";
  };
  k.make_inputs = [flaw](const std::vector<int64_t>& shape, at::ScalarType dtype,
                         const at::Device& device, at::Generator& gen) -> runner::KernelInputs {
    const auto options = at::TensorOptions().dtype(dtype).device(device);
    if (flaw == Flaw::constant_inputs) return {at::ones(shape, options)};
    return {at::randn(shape, gen, options)};
  };
  k.make_output = [](const runner::KernelInputs& in) { return at::empty_like(in[0]); };
  const int64_t mode = flaw == Flaw::wrong_value ? 1 : flaw == Flaw::half_written ? 2 : 0;
  k.custom = [factor, mode](const runner::KernelInputs& in, at::Tensor& out) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("test_kernels::scale", "out")
                               .typed<at::Tensor&(const at::Tensor&, double, int64_t, at::Tensor&)>();
    op.call(in[0], factor, mode, out);
  };
  k.native = [factor](const runner::KernelInputs& in, at::Tensor& out) {
    at::mul_out(out, in[0], at::scalar_tensor(factor, in[0].options()));
  };
  k.reference = [factor](const runner::KernelInputs& in) { return in[0] * factor; };
  k.differentiable = [factor, flaw](const runner::KernelInputs& in) {
    return ScaleFunction::apply(in[0], factor, flaw == Flaw::wrong_grad);
  };
  k.grad_inputs = {0};
  k.bytes_moved = [](const runner::KernelInputs& in) {
    return 2.0 * static_cast<double>(in[0].nbytes());
  };
  k.flops = [](const runner::KernelInputs& in) { return static_cast<double>(in[0].numel()); };
  return k;
}

void register_plugins(runner::Registrar& r) {
  runner::OptionBinder<ScaleOptions> options;
  options.field("factor", &ScaleOptions::factor, "the scale s of y = x * s").range(-1e6, 1e6);
  const auto add = [&](const char* name, const char* help, Flaw flaw) {
    r.add_kernel(name, help, options,
                 [flaw](const ScaleOptions& o) { return scale_case(o.factor, flaw); });
  };
  add("good_scale", "y = x * s, right (test plugin)", Flaw::none);
  add("wrong_scale", "y = x * s * 1.001: a wrong value (test plugin)", Flaw::wrong_value);
  add("half_written", "y = x * s in the first half only (test plugin)", Flaw::half_written);
  add("wrong_grad", "y = x * s with twice the gradient (test plugin)", Flaw::wrong_grad);
  add("constant_inputs", "y = x * s on inputs of ones (test plugin)", Flaw::constant_inputs);
  r.add_kernel("float32_only", "y = x * s in float32 only (test plugin)", options,
               [](const ScaleOptions& o) {
                 runner::KernelCase k = scale_case(o.factor, Flaw::none);
                 k.dtypes = {at::kFloat};
                 return k;
               });
  r.add_kernel("cuda_only", "an op with a CUDA kernel only (test plugin)", options,
               [](const ScaleOptions& o) {
                 runner::KernelCase k = scale_case(o.factor, Flaw::none);
                 k.ops = {"test_kernels::cuda_scale"};
                 return k;
               });
  r.add_kernel("unregistered_op", "names an op no library defines (test plugin)", options,
               [](const ScaleOptions& o) {
                 runner::KernelCase k = scale_case(o.factor, Flaw::none);
                 k.ops = {"test_kernels::nothing"};
                 return k;
               });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
