// Test plugin built with a deliberately wrong SDK ABI version (CMake defines
// RUNNER_PLUGIN_ABI_VERSION=999): the host must refuse it before registering.
#include <runner/sdk.hpp>

#include <stdexcept>

namespace {
void register_plugins(runner::Registrar&) {
  throw std::logic_error("the host must never call a library whose ABI does not match");
}
}  // namespace

RUNNER_PLUGIN(register_plugins)
