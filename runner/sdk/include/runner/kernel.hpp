// Kernel plugins: custom operators and the benchmark cases that exercise them.
//
// The library registers its ops with TORCH_LIBRARY_FRAGMENT(ns, m) (CPU and,
// when built with CUDA, CUDA implementations via TORCH_LIBRARY_IMPL); the
// registration runs when the host loads the library. The Kernel object
// declares how to benchmark them: an op, a reference implementation, an
// input generator over shapes and dtypes, and a tolerance.
//
// Not yet: nothing runs kernel experiments, so the host refuses a library
// that calls Registrar::add_kernel (with a message saying so) rather than
// listing plugins it could never run.
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

namespace runner {

/// One benchmark case of a kernel plugin.
struct KernelCase {
  std::string op;                        ///< qualified op name, e.g. "myops::fused_gelu"
  std::vector<std::vector<std::int64_t>> shapes;  ///< input shapes to sweep
  std::vector<torch::ScalarType> dtypes; ///< dtypes to sweep
  /// Makes the inputs for one shape and dtype on a device.
  std::function<std::vector<torch::Tensor>(const std::vector<std::int64_t>& shape,
                                           torch::ScalarType dtype, torch::Device device)>
      make_inputs;
  /// Runs the op under test.
  std::function<torch::Tensor(const std::vector<torch::Tensor>&)> run;
  /// Runs the reference implementation (e.g. composed ATen ops).
  std::function<torch::Tensor(const std::vector<torch::Tensor>&)> reference;
  double atol = 1e-5;                    ///< absolute tolerance against the reference
  double rtol = 1e-4;                    ///< relative tolerance against the reference
  /// Bytes moved per call for a given input (for achieved bandwidth); 0 = unknown.
  std::function<double(const std::vector<torch::Tensor>&)> bytes_moved;
  /// FLOPs per call for a given input; 0 = unknown.
  std::function<double(const std::vector<torch::Tensor>&)> flops;
};

/// A kernel plugin: the cases it declares.
class Kernel {
 public:
  virtual ~Kernel() = default;
  /// The benchmark cases this kernel offers.
  virtual std::vector<KernelCase> cases() = 0;
};

}  // namespace runner
