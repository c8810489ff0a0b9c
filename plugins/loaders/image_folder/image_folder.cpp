// Loader `image_folder` (being written).
#include <runner/sdk.hpp>

namespace {
void register_plugins(runner::Registrar&) {}
}  // namespace

RUNNER_PLUGIN(register_plugins)
