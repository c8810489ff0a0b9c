// Gradient clipping by global L2 norm ([train] clip_grad_norm), as
// torch.nn.utils.clip_grad_norm_(parameters, max_norm) does by default
// (norm_type 2, the foreach path on CPU and CUDA).
#pragma once

#include <torch/types.h>

#include <vector>

namespace runner::training {

/// Scales the gradients of `parameters` so that their global L2 norm is at
/// most `max_norm` and returns the norm before clipping, as a 0-dim tensor on
/// the first gradient's device (float32 for float32 gradients).
///
/// As PyTorch: gradients are grouped by device and dtype, each group's
/// per-tensor norms come from one _foreach_norm, the total is the L2 norm of
/// all of them, and every gradient is multiplied by
/// min(max_norm / (total + 1e-6), 1) - also when that is 1. Parameters
/// without a gradient are skipped; with none at all the norm is 0 (a CPU
/// tensor) and nothing changes. A non-finite gradient makes the norm inf or
/// nan and, through the factor, the gradients nan or 0: PyTorch's result,
/// not an error (error_if_nonfinite = False).
///
/// Nothing is read on the host: on a GPU the caller decides when to pay the
/// synchronisation of reading the norm. max_norm <= 0 is the experiment
/// layer's to refuse; here it scales every gradient by 0 or less.
[[nodiscard]] torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters,
                                           double max_norm);

}  // namespace runner::training
