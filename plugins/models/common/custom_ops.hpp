// A model option that names a custom op (`norm_op = "runner::layernorm"`):
// the op is looked up in LibTorch's dispatcher when the model is built,
// checked against the schema the model calls it with, and held as a typed
// handle for forward. Every check throws runner::OptionError(option, ...),
// which the host reports at the option's file:line:col. Used by the
// transformer_lm and vit plugins.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/linear.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <runner/sdk.hpp>

#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace runner_models::ops {

/// How the model calls an op of each kind (the schema's float is a double in
/// C++, its str a c10::string_view, as ATen's own operators take them).
using LayerNormFn = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double);
using RmsNormFn = at::Tensor(const at::Tensor&, const at::Tensor&, double);
using BiasGeluFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);

/// What an option's op must look like.
template <typename Fn>
struct OpContract {
  const char* types;      ///< argument and return types: "(Tensor, Tensor, float) -> Tensor"
  const char* arguments;  ///< what the model passes, in order: "x, weight, eps"
  const char* like;       ///< the built-in kernels plugin's op of this kind
  const char* fallback;   ///< what the model runs when the option is empty
};

inline constexpr OpContract<LayerNormFn> kLayerNorm{
    "(Tensor, Tensor, Tensor, float) -> Tensor", "x, weight, bias, eps", "runner::layernorm",
    "ATen's layer_norm"};
inline constexpr OpContract<RmsNormFn> kRmsNorm{"(Tensor, Tensor, float) -> Tensor",
                                                "x, weight, eps", "runner::rmsnorm",
                                                "the model's RMSNorm in ATen ops"};
inline constexpr OpContract<BiasGeluFn> kBiasGelu{"(Tensor, Tensor, str) -> Tensor",
                                                  "x, bias, approximate", "runner::bias_gelu",
                                                  "ATen's gelu after the Linear's bias"};

/// "(Tensor, Tensor, float) -> Tensor": the types of a schema, without names,
/// defaults or alias annotations (those are checked apart).
inline std::string types_of(const c10::FunctionSchema& schema) {
  auto list = [](const std::vector<c10::Argument>& arguments, bool more) {
    std::string out;
    for (std::size_t i = 0; i < arguments.size(); ++i)
      out += (i ? ", " : "") + arguments[i].real_type()->str();
    if (more) out += arguments.empty() ? "..." : ", ...";
    return out;
  };
  const std::string returns = list(schema.returns(), schema.is_varret());
  return "(" + list(schema.arguments(), schema.is_vararg()) + ") -> " +
         (schema.returns().size() == 1 && !schema.is_varret() ? returns : "(" + returns + ")");
}

namespace detail {

inline bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front())) != 0) return false;
  for (const char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  return true;
}

/// "ns::name" or "ns::name.overload" -> {"ns::name", "overload"}; nullopt when malformed.
inline std::optional<c10::OperatorName> parse(const std::string& text) {
  const std::size_t colons = text.find("::");
  if (colons == std::string::npos) return std::nullopt;
  const std::string_view ns = std::string_view(text).substr(0, colons);
  std::string_view rest = std::string_view(text).substr(colons + 2);
  std::string_view overload;
  if (const std::size_t dot = rest.find('.'); dot != std::string_view::npos) {
    overload = rest.substr(dot + 1);
    rest = rest.substr(0, dot);
    if (!is_identifier(overload)) return std::nullopt;
  }
  if (!is_identifier(ns) || !is_identifier(rest)) return std::nullopt;
  return c10::OperatorName(std::string(ns) + "::" + std::string(rest), std::string(overload));
}

/// The dispatch key of a device's kernels, when runner checks that device.
inline std::optional<c10::DispatchKey> backend_of(const c10::Device& device) {
  if (device.is_cpu()) return c10::DispatchKey::CPU;
  if (device.is_cuda()) return c10::DispatchKey::CUDA;
  return std::nullopt;
}

inline std::optional<c10::DispatchKey> autograd_key_of(const c10::Device& device) {
  if (device.is_cpu()) return c10::DispatchKey::AutogradCPU;
  if (device.is_cuda()) return c10::DispatchKey::AutogradCUDA;
  return std::nullopt;
}

}  // namespace detail

/// The op that option `option` names, checked for use by a model built with
/// `context`: nullopt when `name` is empty (the model's ATen path). Throws
/// runner::OptionError(option, ...) when the name is malformed, no loaded
/// library registers the op, it writes to its arguments, its types are not
/// the contract's, it has no kernel for the run's device, it has no autograd
/// kernel and the run trains, or its kernel's C++ signature is not Fn.
template <typename Fn>
std::optional<c10::TypedOperatorHandle<Fn>> find_op(const std::string& option,
                                                    const std::string& name,
                                                    const OpContract<Fn>& contract,
                                                    const runner::ModelContext& context) {
  if (name.empty()) return std::nullopt;
  const std::string leave = "leave " + option + " empty for " + contract.fallback;
  const std::optional<c10::OperatorName> op_name = detail::parse(name);
  if (!op_name)
    throw runner::OptionError(option, "'" + name +
                                          "' is not an op name: write \"namespace::name\" or "
                                          "\"namespace::name.overload\", e.g. \"" +
                                          contract.like + "\"");
  const std::optional<c10::OperatorHandle> handle =
      c10::Dispatcher::singleton().findSchema(*op_name);
  if (!handle)
    throw runner::OptionError(
        option, "op '" + name +
                    "' is not registered: no loaded library defines it; load the kernel plugin "
                    "that does (`runner plugins` lists the loaded plugins; " +
                    contract.like + " is the built-in kernels plugin's), or " + leave);
  const c10::FunctionSchema& schema = handle->schema();
  const std::string found = c10::toString(schema);
  if (schema.is_mutable())
    throw runner::OptionError(option, "op '" + name + "' writes to its arguments (" + found +
                                          "); " + option + " needs a functional op like " +
                                          contract.like);
  const std::string types = types_of(schema);
  if (types != contract.types)
    throw runner::OptionError(option, "op '" + name + "' does not have the schema " + option +
                                          " needs: expected " + contract.types + " (" +
                                          contract.arguments + ", as " + contract.like +
                                          "), found " + types + " (" + found + ")");
  if (const auto key = detail::backend_of(context.device);
      key && !handle->hasComputedKernelForDispatchKey(*key))
    throw runner::OptionError(option, "op '" + name + "' has no kernel for " +
                                          context.device.str() +
                                          ", the run's device; run on a device it supports, "
                                          "or " + leave);
  if (context.training) {
    using K = c10::DispatchKey;
    const auto device_key = detail::autograd_key_of(context.device);
    const bool differentiable = handle->hasKernelForDispatchKey(K::Autograd) ||
                                handle->hasKernelForDispatchKey(K::CompositeImplicitAutograd) ||
                                (device_key && handle->hasKernelForDispatchKey(*device_key));
    if (!differentiable)
      throw runner::OptionError(
          option, "op '" + name +
                      "' has no autograd kernel, so a training run cannot compute gradients "
                      "through it; register one (Autograd or CompositeImplicitAutograd), or " +
                      leave);
  }
  try {
    return handle->template typed<Fn>();
  } catch (const c10::Error& e) {
    // LibTorch's text names the registered and the requested C++ signatures.
    const std::string text = e.what_without_backtrace();
    const std::string marker = "correct signature:";
    std::string registered = "another one";
    if (const std::size_t at = text.find(marker); at != std::string::npos) {
      const std::size_t begin = text.find_first_not_of(' ', at + marker.size());
      registered = text.substr(begin, text.find('\n', begin) - begin);
    }
    throw runner::OptionError(
        option, "op '" + name + "' has a kernel whose C++ signature is " + registered +
                    ", not " + c10::impl::CppSignature::make<Fn>().name() +
                    "; register its kernels with the types ATen's operators take (float as "
                    "double, str as c10::string_view)");
  }
}

// Calling the ops. Their kernels take contiguous tensors of one dtype: the
// input is made contiguous (a no-op for the models' activations) and the
// parameters are cast to its dtype, as CPU autocast's layer_norm and linear
// run them (a no-op unless autocast made the input lower-precision).

/// A norm of the last dimension of x through a layernorm-like op.
inline at::Tensor layer_norm(const c10::TypedOperatorHandle<LayerNormFn>& op, const at::Tensor& x,
                             const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const at::Tensor input = x.contiguous();
  return op.call(input, weight.to(input.scalar_type()), bias.to(input.scalar_type()), eps);
}

/// An RMS norm of the last dimension of x through an rmsnorm-like op.
inline at::Tensor rms_norm(const c10::TypedOperatorHandle<RmsNormFn>& op, const at::Tensor& x,
                           const at::Tensor& weight, double eps) {
  const at::Tensor input = x.contiguous();
  return op.call(input, weight.to(input.scalar_type()), eps);
}

/// gelu(x W^T + bias) through a bias_gelu-like op: the product without the
/// bias, which the op adds.
inline at::Tensor linear_gelu(const c10::TypedOperatorHandle<BiasGeluFn>& op, const at::Tensor& x,
                              const at::Tensor& weight, const at::Tensor& bias,
                              c10::string_view approximate) {
  const at::Tensor product = at::linear(x, weight).contiguous();
  return op.call(product, bias.to(product.scalar_type()), approximate);
}

/// What a model records of the op it calls (Model::provenance): its full
/// schema and where it was registered.
template <typename Fn>
std::string describe(const c10::TypedOperatorHandle<Fn>& op) {
  return c10::toString(op.schema()) + ", " + op.debug();
}

}  // namespace runner_models::ops
