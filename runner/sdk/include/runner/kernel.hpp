// Kernel plugins: a custom operator and how to check and time it.
//
// The library registers its ops with TORCH_LIBRARY_FRAGMENT(ns, m) (CPU and,
// in a CUDA build, CUDA implementations via TORCH_LIBRARY_IMPL; an Autograd
// implementation for ops used in training); the registration runs when the
// host loads the library. Each kernel plugin (Registrar::add_kernel) is one
// op's benchmark: a KernelCase saying how to make inputs, call the custom op
// and the native ATen composition it replaces, compute the reference, and
// count the bytes and FLOPs of a call.
//
// A [kernel] experiment (docs/kernels.md) names the plugin, a shape, a dtype
// and an implementation ("custom", "native" or "eager"). The host checks the
// implementation against a float64 reference on fresh random inputs into a
// NaN-poisoned output (and its gradients, when the op has a backward)
// before it times a single call; a case that fails is recorded as failed
// with its error and never timed.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace runner {

/// The inputs of one call of a kernel case, as its make_inputs made them.
using KernelInputs = std::vector<torch::Tensor>;

/// What a kernel plugin benchmarks: one custom op, the native ATen
/// composition it stands in for, and how to feed, check and count them.
/// Every function must be set except `differentiable` (empty: no backward)
/// and `flops` (empty: not counted).
struct KernelCase {
  /// Qualified names of the custom ops a call uses (the functional op, its
  /// out variant "ns::op.out", its backward): the host checks that each has a
  /// kernel for the run's device before any run starts.
  std::vector<std::string> ops;
  /// The dtypes the op computes in.
  std::vector<torch::ScalarType> dtypes;
  /// Per dtype (each of `dtypes`): the largest relative error,
  /// max|y - ref| / max|ref| against the float64 reference, that passes.
  std::map<torch::ScalarType, double> tolerance;
  /// Per dtype, the same for gradients; a dtype without an entry uses `tolerance`.
  std::map<torch::ScalarType, double> grad_tolerance;
  /// Why `shape` is not a shape the op takes ("softmax takes [rows, cols]"),
  /// or "" when it is. Called before any run.
  std::function<std::string(const std::vector<std::int64_t>& shape)> check_shape;
  /// Fresh random inputs of `shape` and `dtype` on `device`, drawn from
  /// `generator` (never constant: zeros or ones hide wrong indexing).
  std::function<KernelInputs(const std::vector<std::int64_t>& shape, torch::ScalarType dtype,
                             const torch::Device& device, at::Generator& generator)>
      make_inputs;
  /// The output of a call on `inputs`, allocated but not filled: the host
  /// poisons it with NaN before a call, so an element the op leaves unwritten shows.
  std::function<torch::Tensor(const KernelInputs&)> make_output;
  /// The custom op, writing into `out` (its out variant).
  std::function<void(const KernelInputs&, torch::Tensor& out)> custom;
  /// The native composition of ATen ops, writing into `out` (at::mul_out):
  /// the fair baseline, which does not allocate its output either.
  std::function<void(const KernelInputs&, torch::Tensor& out)> native;
  /// The function as user code writes it, returning a fresh tensor
  /// (`x * s`): timed as implementation "eager", and, on float64 copies of
  /// the inputs, the reference of every correctness check.
  std::function<torch::Tensor(const KernelInputs&)> reference;
  /// The custom op's functional form through autograd, or empty when it has
  /// no backward. The host checks the gradients it gives `grad_inputs`
  /// against the reference's, in float64.
  std::function<torch::Tensor(const KernelInputs&)> differentiable;
  /// The inputs the gradient check differentiates (indices into the inputs).
  std::vector<std::size_t> grad_inputs;
  /// Bytes a call must move at least: each input read once, the output written once.
  std::function<double(const KernelInputs&)> bytes_moved;
  /// Floating-point operations of a call (empty: not counted).
  std::function<double(const KernelInputs&)> flops;
};

}  // namespace runner
