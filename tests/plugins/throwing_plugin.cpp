// Test plugin whose model factory throws: the host must report the plugin's
// name and library with the message.
#include <runner/sdk.hpp>

#include <stdexcept>

namespace {
void register_plugins(runner::Registrar& r) {
  r.add_model("explodes", "a model whose factory throws (test plugin)", runner::OptionSchema{},
              [](const runner::Options&, const runner::ModelContext&)
                  -> std::unique_ptr<runner::Model> {
                throw std::runtime_error("factory failed on purpose");
              });
}
}  // namespace

RUNNER_PLUGIN(register_plugins)
