// What the built-in optimizer plugins share beyond the SDK: the `impl`
// choice, per-parameter state, the bucketing of tensors by device and dtype
// that PyTorch's multi-tensor and fused paths do, and PyTorch's numerics.
// Parameter groups for `no_decay` and the runner::Optimizer that owns a
// LibTorch optimizer are the SDK's (runner/param_groups.hpp), for plugins
// outside this tree too.
//
// Header only, included by each plugin's one .cpp; everything here is built
// into each plugin library separately (hidden visibility), so plugins never
// share state.
#pragma once

#include <ATen/ScalarOps.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <runner/param_groups.hpp>
#include <runner/sdk.hpp>

namespace runner_optimizers {

/// How an optimizer applies its update, as PyTorch names the three paths.
enum class Impl {
  loop,     ///< one parameter at a time (PyTorch's _single_tensor_*; its CPU default)
  foreach,  ///< one at::_foreach_* call per step of the algorithm (_multi_tensor_*)
  fused,    ///< one fused ATen kernel for the whole update (_fused_*)
};

/// The Impl an `impl` option names (the schema's one_of has checked the spelling).
inline Impl parse_impl(const std::string& impl) {
  if (impl == "foreach") return Impl::foreach;
  if (impl == "fused") return Impl::fused;
  return Impl::loop;
}

/// Refuses a pair of decay rates PyTorch refuses: each must be in [0, 1) (the
/// schema's inclusive range already checked [0, 1]).
inline void check_betas(const std::array<double, 2>& betas, const char* option = "betas") {
  if (betas[0] < 1.0 && betas[1] < 1.0) return;
  throw runner::OptionError(option, std::string(option) + " must each be below 1, found " +
                                        runner::to_string(runner::OptionValue{std::vector<double>{
                                            betas[0], betas[1]}}));
}

/// The state of parameter `p` in a LibTorch optimizer's state map, made by
/// `make()` the first time (PyTorch makes it at the parameter's first step).
template <typename State, typename Make>
State& state_of(ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>>& states,
                const torch::Tensor& p, Make&& make) {
  auto& slot = states[p.unsafeGetTensorImpl()];
  if (!slot) slot = std::forward<Make>(make)();
  return static_cast<State&>(*slot);
}

/// Per-step lists of one parameter group split by device and dtype, in the
/// order parameters first appear: one multi-tensor or fused ATen call takes
/// tensors of one device and dtype, as PyTorch's
/// Optimizer._group_tensors_by_device_and_dtype arranges them.
template <typename Lists>
class Buckets {
 public:
  /// The lists parameter `p` belongs to.
  Lists& of(const torch::Tensor& p) {
    const Key key{static_cast<int>(p.device().type()), p.device().index(),
                  static_cast<int>(p.scalar_type())};
    for (auto& [k, lists] : buckets_)
      if (k == key) return lists;
    return buckets_.emplace_back(key, Lists{}).second;
  }
  auto begin() { return buckets_.begin(); }
  auto end() { return buckets_.end(); }

 private:
  using Key = std::tuple<int, int, int>;
  std::vector<std::pair<Key, Lists>> buckets_;
};

/// A step as LibTorch's optimizers take one: the closure (if any) with
/// gradients on, the update without.
template <typename Update>
torch::Tensor run_step(const torch::optim::Optimizer::LossClosure& closure, Update&& update) {
  torch::Tensor loss;
  if (closure) {
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  std::forward<Update>(update)();
  return loss;
}

/// A number as torch.optim's Python code hands it to a tensor operation: a
/// wrapped 0-dim double tensor, not a c10::Scalar. The two round differently
/// on reduced-precision tensors: aten::mul_.Scalar first rounds 0.99 to the
/// tensor's dtype (0.98828125 in bfloat16), while Python's
/// `exp_avg_sq.mul_(0.99)` multiplies by 0.99 in float and rounds the product
/// once (measured: 7 * 0.99 gives 6.90625 against Python's 6.9375). A loop
/// that must match PyTorch's single-tensor path in bfloat16 passes its
/// multipliers through this; in float32 both give the same result. (Python
/// hands the _foreach_* ops a c10::Scalar too, so foreach paths pass doubles.)
inline at::Tensor python_number(double value) { return at::native::wrapped_scalar_tensor(value); }

/// The gradient the update reads, refusing sparse ones (none of these
/// optimizers has a sparse path; PyTorch's refuse them too, except Adagrad's).
inline const torch::Tensor& dense_grad(const torch::Tensor& p, const char* optimizer) {
  const torch::Tensor& grad = p.grad();
  TORCH_CHECK(!grad.is_sparse(), optimizer,
              " does not support sparse gradients; make the model's embeddings dense "
              "(sparse = false)");
  return grad;
}

}  // namespace runner_optimizers
