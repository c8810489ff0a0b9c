// Kernel experiments (kind = "kernel", docs/kernels.md): one implementation
// of one kernel plugin's op at one shape and dtype, checked against a
// float64 reference before a single call is timed.
#pragma once

#include <string>

#include "runner/engine/engine.hpp"

namespace runner {

/// One repetition of a kernel experiment: the correctness gate (output into
/// a NaN-poisoned buffer, gradients for a custom op with a backward), then,
/// only if it passed, warm-up and measured calls over rotated buffers, and
/// the figures (call_time, bandwidth, FLOP/s, fractions of the measured
/// peaks). A failed gate is a failed run with its error figures and no samples.
[[nodiscard]] RunOutcome run_kernel(const RunRequest& request);

/// What only the kernel plugin can tell, before any run: it builds with its
/// options, computes in kernel.dtype, takes kernel.shape, declares what the
/// host needs, and (impl "custom") each op it names is registered with a
/// kernel for `device` ("cpu" or "cuda"). Throws runner::Error (input) at
/// the key responsible.
void check_kernel_before_runs(const Experiment& experiment, const PluginHost& host,
                              const std::string& device);

}  // namespace runner
