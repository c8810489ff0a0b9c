// How the engine reports errors: a plugin's refusal of one of its options
// and an augmentation that does not fit the data, each at the experiment's
// key responsible; and the text of any exception for a failed run's record.
#pragma once

#include <exception>
#include <string>

#include "runner/engine/augment.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"

namespace runner {

/// A plugin that refuses one of its options (runner::OptionError) is
/// reported where the experiment writes that option, in the section that
/// configures plugins of its kind: "'kernel.factor' of kernel plugin 'scale': ...".
[[noreturn]] void rethrow_at_option(const PluginOptionError& e, const PluginChoice& choice);

/// An augmentation that does not apply to the loader's samples, at its key.
[[noreturn]] void rethrow_at_key(const AugmentError& e, const Experiment& exp);

/// The text of an exception without LibTorch's C++ backtrace.
[[nodiscard]] std::string message_of(const std::exception& e);

}  // namespace runner
