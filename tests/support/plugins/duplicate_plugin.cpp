// Test plugin registering a name the good test plugin also registers.
#include <runner/sdk.hpp>

namespace {
void register_plugins(runner::Registrar& r) {
  r.add_model("tiny_linear", "a clash (test plugin)", runner::OptionSchema{},
              [](const runner::Options&, const runner::ModelContext&)
                  -> std::unique_ptr<runner::Model> { return nullptr; });
}
}  // namespace

RUNNER_PLUGIN(register_plugins)
