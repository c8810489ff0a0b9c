// How the engine reports a plugin's refusal of one of its options.
#pragma once

#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"

namespace runner {

/// A plugin that refuses one of its options (runner::OptionError) is
/// reported where the experiment writes that option, in the section that
/// configures plugins of its kind: "'kernel.factor' of kernel plugin 'scale': ...".
[[noreturn]] void rethrow_at_option(const PluginOptionError& e, const PluginChoice& choice);

}  // namespace runner
