// The runner::* op schemas, the argument checks every device shares, and
// the Autograd implementations of the functional ops. The Autograd code is
// device-independent: forward redispatches below autograd to the device's
// kernel (CPU or CUDA), backward calls the *_backward ops through the
// dispatcher.
#include "ops.hpp"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <initializer_list>
#include <string>
#include <tuple>

namespace runner_kernels {

namespace {

// "float32", "int64", ...: the names users write in experiments.
std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(type);
  }
}

// The checks of one op; each message starts with the op's name.
struct Checks {
  const char* op;

  void defined(const at::Tensor& t, const char* name) const {
    TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
  }
  void floating(const at::Tensor& t, const char* name) const {
    defined(t, name);
    const auto type = t.scalar_type();
    TORCH_CHECK(type == at::kFloat || type == at::kDouble || type == at::kBFloat16 ||
                    type == at::kHalf,
                op, ": ", name, " must be float32, float64, bfloat16 or float16, not ",
                dtype_name(type));
  }
  void contiguous(const at::Tensor& t, const char* name) const {
    TORCH_CHECK(t.is_contiguous(), op, ": ", name,
                " must be contiguous (call .contiguous() first)");
  }
  // `t` on `ref`'s device with `ref`'s dtype.
  void like(const at::Tensor& t, const char* name, const at::Tensor& ref,
            const char* ref_name) const {
    defined(t, name);
    TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " must be on ", ref_name,
                "'s device (", ref.device(), "), not ", t.device());
    TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": ", name, " must have ", ref_name,
                "'s dtype (", dtype_name(ref.scalar_type()), "), not ",
                dtype_name(t.scalar_type()));
  }
  // `t` exactly as `ref`: device, dtype, shape, contiguous.
  void same(const at::Tensor& t, const char* name, const at::Tensor& ref,
            const char* ref_name) const {
    like(t, name, ref, ref_name);
    TORCH_CHECK(t.sizes() == ref.sizes(), op, ": ", name, " must have ", ref_name, "'s shape ",
                ref.sizes(), ", not ", t.sizes());
    contiguous(t, name);
  }
  // The main input: one of the four dtypes, contiguous.
  void main(const at::Tensor& t, const char* name) const {
    floating(t, name);
    contiguous(t, name);
  }
  // x seen as rows of its last dimension.
  Rows rows(const at::Tensor& t, const char* name) const {
    TORCH_CHECK(t.dim() >= 1, op, ": ", name,
                " must have at least one dimension (rows over its last), not a 0-d tensor");
    Rows r;
    r.cols = t.size(-1);
    r.rows = 1;
    for (std::int64_t d = 0; d + 1 < t.dim(); ++d) r.rows *= t.size(d);
    return r;
  }
  // A per-column parameter: 1-D, of the last dimension's length.
  void vector(const at::Tensor& t, const char* name, const at::Tensor& x, const Rows& r) const {
    like(t, name, x, "x");
    TORCH_CHECK(t.dim() == 1 && t.size(0) == r.cols, op, ": ", name, " must have shape [",
                r.cols, "] (x's last dimension), not ", t.sizes());
    contiguous(t, name);
  }
  // The out tensor, when given: exactly as x, and not overlapping an input
  // in part (the same memory as x is fine: every kernel reads an element of
  // x before it writes that element).
  void output(const at::Tensor& out, const at::Tensor& x,
              std::initializer_list<at::Tensor> inputs) const {
    if (!out.defined()) return;
    same(out, "out", x, "x");
    for (const auto& input : inputs)
      TORCH_CHECK(at::get_overlap_status(out, input) != at::MemOverlapStatus::Partial, op,
                  ": out overlaps an input in part");
  }
};


// The checks both norms' backward ops make: x's rows, a weight over them,
// and a gradient like x.
Rows check_norm_backward(const char* op, const at::Tensor& grad, const at::Tensor& x,
                         const at::Tensor& weight) {
  const Checks c{op};
  c.main(x, "x");
  const Rows r = c.rows(x, "x");
  c.vector(weight, "weight", x, r);
  c.same(grad, "grad", x, "x");
  return r;
}

}  // namespace

bool tanh_approximation(std::string_view approximate) {
  if (approximate == "tanh") return true;
  TORCH_CHECK(approximate == "none", "runner::bias_gelu: approximate must be \"none\" or \"tanh\", not \"",
              approximate, "\"");
  return false;
}

void check_scale(const at::Tensor& x, const at::Tensor& out) {
  const Checks c{"runner::scale"};
  c.main(x, "x");
  c.output(out, x, {x});
}

Rows check_bias_gelu(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& out) {
  const Checks c{"runner::bias_gelu"};
  c.main(x, "x");
  const Rows r = c.rows(x, "x");
  c.vector(bias, "bias", x, r);
  c.output(out, x, {x, bias});
  return r;
}

Rows check_softmax(const at::Tensor& x, const at::Tensor& out) {
  const Checks c{"runner::softmax"};
  c.main(x, "x");
  const Rows r = c.rows(x, "x");
  c.output(out, x, {x});
  return r;
}

Rows check_rmsnorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& out) {
  const Checks c{"runner::rmsnorm"};
  c.main(x, "x");
  const Rows r = c.rows(x, "x");
  c.vector(weight, "weight", x, r);
  c.output(out, x, {x, weight});
  return r;
}

Rows check_layernorm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     const at::Tensor& out) {
  const Checks c{"runner::layernorm"};
  c.main(x, "x");
  const Rows r = c.rows(x, "x");
  c.vector(weight, "weight", x, r);
  c.vector(bias, "bias", x, r);
  c.output(out, x, {x, weight, bias});
  return r;
}

Rows check_bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                              const at::Tensor& bias) {
  const Checks c{"runner::bias_gelu_backward"};
  c.main(x, "x");
  const Rows r = c.rows(x, "x");
  c.vector(bias, "bias", x, r);
  c.same(grad, "grad", x, "x");
  return r;
}

Rows check_softmax_backward(const at::Tensor& grad, const at::Tensor& y) {
  const Checks c{"runner::softmax_backward"};
  c.main(y, "y");
  const Rows r = c.rows(y, "y");
  c.same(grad, "grad", y, "y");
  return r;
}

Rows check_rmsnorm_backward(const at::Tensor& grad, const at::Tensor& x,
                            const at::Tensor& weight) {
  return check_norm_backward("runner::rmsnorm_backward", grad, x, weight);
}

Rows check_layernorm_backward(const at::Tensor& grad, const at::Tensor& x,
                              const at::Tensor& weight) {
  return check_norm_backward("runner::layernorm_backward", grad, x, weight);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename Signature>
c10::TypedOperatorHandle<Signature> op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload).typed<Signature>();
}

// Autograd hands backward gradients of any layout (sum()'s is an expanded
// scalar); the kernels take contiguous tensors.
at::Tensor contiguous(const at::Tensor& grad) { return grad.contiguous(); }

class ScaleFunction : public torch::autograd::Function<ScaleFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double s) {
    ctx->saved_data["s"] = s;
    at::AutoDispatchBelowADInplaceOrView guard;
    return call(x, s);
  }
  // Through the dispatcher again, Autograd included: scale is its own
  // derivative, so it can be differentiated twice.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {call(contiguous(grads[0]), ctx->saved_data["s"].toDouble()), at::Tensor()};
  }

 private:
  static at::Tensor call(const at::Tensor& x, double s) {
    static const auto handle = op<at::Tensor(const at::Tensor&, double)>("runner::scale");
    return handle.call(x, s);
  }
};

class BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                            c10::string_view approximate) {
    ctx->save_for_backward({x, bias});
    ctx->saved_data["approximate"] = std::string(approximate);
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle =
        op<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>(
            "runner::bias_gelu");
    return handle.call(x, bias, approximate);
  }
  // The bias gradient is dx summed over rows (an ATen reduction).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string approximate = ctx->saved_data["approximate"].toStringRef();
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle = op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                             const at::Tensor&, c10::string_view)>(
        "runner::bias_gelu_backward");
    at::Tensor dx = handle.call(contiguous(grads[0]), saved[0], saved[1], approximate);
    at::Tensor dbias = dx.reshape({-1, saved[1].size(0)}).sum(0);
    return {dx, dbias, at::Tensor()};
  }
};

class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    at::Tensor y;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      static const auto handle = op<at::Tensor(const at::Tensor&)>("runner::softmax");
      y = handle.call(x);
    }
    ctx->save_for_backward({y});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle =
        op<at::Tensor(const at::Tensor&, const at::Tensor&)>("runner::softmax_backward");
    return {handle.call(contiguous(grads[0]), saved[0])};
  }
};

class RmsnormFunction : public torch::autograd::Function<RmsnormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            double eps) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle =
        op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("runner::rmsnorm");
    return handle.call(x, weight, eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle =
        op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                              const at::Tensor&, double)>(
            "runner::rmsnorm_backward");
    auto [dx, dweight] = handle.call(contiguous(grads[0]), saved[0], saved[1],
                                     ctx->saved_data["eps"].toDouble());
    return {dx, dweight, at::Tensor()};
  }
};

class LayernormFunction : public torch::autograd::Function<LayernormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle =
        op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
            "runner::layernorm");
    return handle.call(x, weight, bias, eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::AutoDispatchBelowADInplaceOrView guard;
    static const auto handle =
        op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                          const at::Tensor&, double)>(
            "runner::layernorm_backward");
    auto [dx, dweight, dbias] = handle.call(contiguous(grads[0]), saved[0], saved[1],
                                            ctx->saved_data["eps"].toDouble());
    return {dx, dweight, dbias, at::Tensor()};
  }
};

at::Tensor scale_autograd(const at::Tensor& x, double s) { return ScaleFunction::apply(x, s); }

at::Tensor bias_gelu_autograd(const at::Tensor& x, const at::Tensor& bias,
                              c10::string_view approximate) {
  return BiasGeluFunction::apply(x, bias, approximate);
}

at::Tensor softmax_autograd(const at::Tensor& x) { return SoftmaxFunction::apply(x); }

at::Tensor rmsnorm_autograd(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return RmsnormFunction::apply(x, weight, eps);
}

at::Tensor layernorm_autograd(const at::Tensor& x, const at::Tensor& weight,
                              const at::Tensor& bias, double eps) {
  return LayernormFunction::apply(x, weight, bias, eps);
}

}  // namespace

}  // namespace runner_kernels

TORCH_LIBRARY_FRAGMENT(runner, m) {
  m.def("scale(Tensor x, float s) -> Tensor");
  m.def("scale.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("bias_gelu(Tensor x, Tensor bias, str approximate=\"none\") -> Tensor");
  m.def(
      "bias_gelu.out(Tensor x, Tensor bias, str approximate=\"none\", *, Tensor(a!) out) -> "
      "Tensor(a!)");
  m.def(
      "bias_gelu_backward(Tensor grad, Tensor x, Tensor bias, str approximate=\"none\") -> "
      "Tensor");
  m.def("softmax(Tensor x) -> Tensor");
  m.def("softmax.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("softmax_backward(Tensor grad, Tensor y) -> Tensor");
  m.def("rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("rmsnorm.out(Tensor x, Tensor weight, float eps, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("rmsnorm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("layernorm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor");
  m.def(
      "layernorm.out(Tensor x, Tensor weight, Tensor bias, float eps, *, Tensor(a!) out) -> "
      "Tensor(a!)");
  m.def(
      "layernorm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor, "
      "Tensor)");
}

TORCH_LIBRARY_IMPL(runner, Autograd, m) {
  m.impl("scale", &runner_kernels::scale_autograd);
  m.impl("bias_gelu", &runner_kernels::bias_gelu_autograd);
  m.impl("softmax", &runner_kernels::softmax_autograd);
  m.impl("rmsnorm", &runner_kernels::rmsnorm_autograd);
  m.impl("layernorm", &runner_kernels::layernorm_autograd);
}
