// Activation checkpointing for model plugins: run a block of the model
// without keeping its intermediate activations, and run it again during the
// backward pass to get them back. Memory for compute: a checkpointed block
// keeps only its input alive between the forward and the backward pass, and
// its forward runs twice.
//
//   torch::Tensor forward(torch::Tensor x) {
//     for (std::size_t i = 0; i < blocks_.size(); ++i)
//       x = policy_.applies_to(i) ? runner::checkpoint(blocks_[i], x) : blocks_[i]->forward(x);
//     return x;
//   }
//
// What makes checkpointed training identical to plain training (the same
// parameter gradients, running statistics and random stream):
//  - Randomness: the recomputation sees the random state the forward saw (the
//    CPU default generator and, for a CUDA input, the CUDA generator of its
//    device, as PyTorch's preserve_rng_state), so dropout draws the same
//    masks; the state afterwards is what it was before the recomputation, so
//    the rest of the step draws what it would have drawn.
//  - Autocast: the recomputation runs under the autocast settings (CPU and
//    the input's device type) of the forward pass.
//  - Buffers: given the block's module, its buffers (BatchNorm's running mean,
//    variance and num_batches_tracked) are restored after the recomputation,
//    so they are updated once per step, not twice as PyTorch's reentrant
//    checkpoint does. Without the module they are updated again.
//  - Parameters: the recomputed graph reaches the block's parameters as
//    leaves; the backward pass through it accumulates into their .grad as
//    plain training does.
// Not supported (as with PyTorch's reentrant checkpoint): double backward
// (create_graph); torch::autograd::grad() through a checkpointed block (the
// recomputation's backward pass accumulates into the parameters' .grad, as
// loss.backward() does, instead of returning them); blocks with side effects
// other than buffer updates and random draws (they happen twice).
//
// The block is called again during backward, after the caller has returned:
// it must capture by value whatever it uses (the module's shared_ptr, extra
// constant tensors), never references to locals. Tensors it captures must not
// require grad unless they are leaves (parameters): gradients reach them only
// through the recomputation.
//
// This header includes LibTorch's autograd function machinery; include it
// directly where it is used (runner/sdk.hpp does not).
#pragma once

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/options.hpp"

namespace runner {

/// A block of a model: one tensor in, one tensor out.
using CheckpointBlock = std::function<torch::Tensor(const torch::Tensor&)>;

namespace detail {

// The random state a forward pass started from.
struct RngState {
  torch::Tensor cpu;
  std::optional<c10::Device> device;  // the input's CUDA device
  torch::Tensor on_device;

  static torch::Tensor state_of(const c10::Device& device) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
  }
  static void set(const c10::Device& device, const torch::Tensor& state) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }

  static RngState capture(const torch::Tensor& input) {
    RngState s;
    s.cpu = state_of(c10::Device(c10::kCPU));
    if (input.is_cuda()) {
      s.device = input.device();
      s.on_device = state_of(input.device());
    }
    return s;
  }
  void restore() const {
    set(c10::Device(c10::kCPU), cpu);
    if (device) set(*device, on_device);
  }
};

// Sets the random state of a forward pass for the lifetime of the scope and
// puts the current one back afterwards.
class RngFork {
 public:
  explicit RngFork(const RngState& forward) : before_(now_like(forward)) { forward.restore(); }
  ~RngFork() { before_.restore(); }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  static RngState now_like(const RngState& forward) {
    RngState s;
    s.cpu = RngState::state_of(c10::Device(c10::kCPU));
    if (forward.device) {
      s.device = forward.device;
      s.on_device = RngState::state_of(*forward.device);
    }
    return s;
  }
  RngState before_;
};

// Autocast settings of the CPU and of the input's device type.
struct AutocastState {
  struct Entry {
    c10::DeviceType type;
    bool enabled;
    c10::ScalarType dtype;
  };
  std::vector<Entry> entries;
  bool cache_enabled = true;

  static AutocastState capture(const torch::Tensor& input) {
    AutocastState s;
    auto add = [&](c10::DeviceType type) {
      s.entries.push_back(
          {type, at::autocast::is_autocast_enabled(type), at::autocast::get_autocast_dtype(type)});
    };
    add(c10::DeviceType::CPU);
    const c10::DeviceType type = input.device().type();
    if (type != c10::DeviceType::CPU && at::autocast::is_autocast_available(type)) add(type);
    s.cache_enabled = at::autocast::is_autocast_cache_enabled();
    return s;
  }
  [[nodiscard]] bool any_enabled() const {
    for (const auto& e : entries)
      if (e.enabled) return true;
    return false;
  }
};

// Applies the forward pass's autocast settings for the scope. Autocast's
// cache of casts is cleared when the outermost autocast scope closes, as
// torch.autocast does: the casts made here belong to this recomputation and
// must not serve a later forward pass with updated weights.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& forward) {
    before_ = forward;
    for (auto& e : before_.entries) {
      e.enabled = at::autocast::is_autocast_enabled(e.type);
      e.dtype = at::autocast::get_autocast_dtype(e.type);
    }
    before_.cache_enabled = at::autocast::is_autocast_cache_enabled();
    nested_ = forward.any_enabled() || before_.any_enabled();
    apply(forward);
    if (nested_) at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (nested_ && at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    apply(before_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  static void apply(const AutocastState& s) {
    for (const auto& e : s.entries) {
      at::autocast::set_autocast_enabled(e.type, e.enabled);
      at::autocast::set_autocast_dtype(e.type, e.dtype);
    }
    at::autocast::set_autocast_cache_enabled(s.cache_enabled);
  }
  AutocastState before_;
  bool nested_ = false;
};

// Copies of buffers taken when the scope opens, written back when it closes.
class BufferRestore {
 public:
  explicit BufferRestore(const std::vector<torch::Tensor>& buffers) : live_(buffers) {
    c10::NoGradGuard no_grad;
    saved_.reserve(live_.size());
    for (const auto& b : live_) saved_.push_back(b.clone());
  }
  ~BufferRestore() {
    c10::NoGradGuard no_grad;
    for (std::size_t i = 0; i < live_.size(); ++i) live_[i].copy_(saved_[i]);
  }
  BufferRestore(const BufferRestore&) = delete;
  BufferRestore& operator=(const BufferRestore&) = delete;

 private:
  std::vector<torch::Tensor> live_, saved_;
};

// What the backward pass needs besides the saved input.
struct CheckpointState : torch::CustomClassHolder {
  CheckpointBlock block;
  std::vector<torch::Tensor> buffers;
  RngState rng;
  AutocastState autocast;
  bool input_requires_grad = false;
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // `anchor`, an empty tensor that requires grad, is passed when the input
  // does not require grad but the block's parameters do: without an input
  // that requires grad, autograd would not record the call at all.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               c10::intrusive_ptr<CheckpointState> state,
                               const torch::Tensor& input,
                               const std::optional<torch::Tensor>& anchor) {
    static_cast<void>(anchor);
    state->rng = RngState::capture(input);
    state->autocast = AutocastState::capture(input);
    ctx->save_for_backward({input});
    // Runs under no-grad (Function::apply): nothing inside is kept.
    torch::Tensor output = state->block(input);
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(
        ctx->saved_data.at("state").toCapsule());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    torch::Tensor input = saved.at(0).detach();
    input.requires_grad_(state->input_requires_grad);
    {
      // The buffers are written back after the backward pass through the
      // recomputation: its graph saved them (BatchNorm's backward takes the
      // running statistics), and an earlier write would fail its version check.
      BufferRestore buffers(state->buffers);
      torch::Tensor output;
      {
        RngFork rng(state->rng);
        AutocastScope autocast(state->autocast);
        c10::AutoGradMode grad(true);
        output = state->block(input);
      }
      if (output.requires_grad()) torch::autograd::backward({output}, {grad_outputs.at(0)});
    }
    // One gradient per argument of forward: state, input, anchor.
    return {torch::Tensor(), state->input_requires_grad ? input.grad() : torch::Tensor(),
            torch::Tensor()};
  }
};

inline torch::Tensor checkpoint(const CheckpointBlock& block, const torch::Tensor& input,
                                torch::nn::Module* module) {
  if (!c10::GradMode::is_enabled()) return block(input);
  bool parameters_need_grad = false;
  if (module != nullptr && !input.requires_grad())
    for (const auto& p : module->parameters())
      if (p.requires_grad()) {
        parameters_need_grad = true;
        break;
      }
  // Nothing to differentiate through this block (without its module, whether
  // its parameters need grad is unknown): run it as it is, which is correct
  // in every case and keeps what autograd needs.
  if (!input.requires_grad() && !parameters_need_grad) return block(input);
  auto state = c10::make_intrusive<CheckpointState>();
  state->block = block;
  state->input_requires_grad = input.requires_grad();
  if (module != nullptr) state->buffers = module->buffers();
  std::optional<torch::Tensor> anchor;
  if (parameters_need_grad) anchor = torch::empty({0}, torch::requires_grad());
  return CheckpointFunction::apply(std::move(state), input, anchor);
}

}  // namespace detail

/// block(input), keeping only `input` for the backward pass, which runs the
/// block again (with the forward's random and autocast state) and
/// backpropagates through it. Under no-grad, or when `input` does not require
/// grad, it is block(input) and nothing more. Buffers the block updates
/// (BatchNorm's running statistics) are updated again by the recomputation:
/// pass the module (the overloads below) to prevent that.
inline torch::Tensor checkpoint(const CheckpointBlock& block, const torch::Tensor& input) {
  return detail::checkpoint(block, input, nullptr);
}

/// As checkpoint(block, input) for a block that belongs to `module`: the
/// module's buffers are restored after the recomputation (updated once per
/// step, as in plain training), and the block is checkpointed also when
/// `input` does not require grad but the module has parameters that do.
/// `module` must outlive the backward pass (models own their blocks).
inline torch::Tensor checkpoint(torch::nn::Module& module, const CheckpointBlock& block,
                                const torch::Tensor& input) {
  return detail::checkpoint(block, input, &module);
}

/// module->forward(input) under checkpoint(*module, ...); the block holds the
/// shared_ptr, so the module lives until the backward pass is done.
template <typename ModuleType>
torch::Tensor checkpoint(const std::shared_ptr<ModuleType>& module, const torch::Tensor& input) {
  return detail::checkpoint([module](const torch::Tensor& x) { return module->forward(x); },
                            input, module.get());
}

/// The same for a module holder (torch::nn::Sequential, torch::nn::Linear, ...).
template <typename Contained>
torch::Tensor checkpoint(const torch::nn::ModuleHolder<Contained>& module,
                         const torch::Tensor& input) {
  return checkpoint(module.ptr(), input);
}

/// Which blocks of a model are checkpointed: the model options `checkpoint`
/// ("none", "blocks", "every_k") and `checkpoint_every` (k >= 1).
struct CheckpointPolicy {
  std::string mode = "none";  ///< none | blocks | every_k
  std::int64_t every = 2;     ///< every_k: blocks 0, k, 2k, ... are checkpointed

  /// True when block `index` (0-based, in forward order) is checkpointed.
  [[nodiscard]] bool applies_to(std::int64_t index) const {
    if (mode == "blocks") return true;
    if (mode == "every_k") return every >= 1 && index % every == 0;
    return false;
  }
  /// True when no block is checkpointed.
  [[nodiscard]] bool none() const { return mode != "blocks" && mode != "every_k"; }
};

/// Declares the options `checkpoint` and `checkpoint_every` on a model's
/// binder, stored in `mode` and `every`; `blocks` names what is checkpointed
/// ("residual block", "encoder layer", ...). Both are declared as added
/// later with defaults, so existing trials keep their identity.
template <typename Opts>
void add_checkpoint_options(OptionBinder<Opts>& options, std::string Opts::*mode,
                            std::int64_t Opts::*every, const std::string& blocks) {
  options
      .field("checkpoint", mode,
             "activation checkpointing: none; blocks = every " + blocks +
                 " recomputed in backward (less memory, ~1 more forward); every_k = " + blocks +
                 "s 0, k, 2k, ... (k = checkpoint_every)")
      .one_of({"none", "blocks", "every_k"})
      .added_later_with_default();
  options
      .field("checkpoint_every", every,
             "every_k: checkpoint every k-th " + blocks + ", starting with the first")
      .range(1, 1024)
      .added_later_with_default();
}

}  // namespace runner
