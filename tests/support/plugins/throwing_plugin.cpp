// Test plugin that fails in every way a library can while registering or
// building, so the host's messages for each are tested through a real
// library. What registration does is chosen by RUNNER_TEST_REGISTRATION
// (read when the host calls it, so one library serves every case):
//   unset       "explodes" (its factory throws) and "nothing" (its factory returns null)
//   throw       registers a model, then throws
//   empty_name  registers a model named ""
//   twice       registers the model "twice" twice
//   kernel      registers a model, then a kernel
#include <runner/sdk.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace {

runner::ModelFactory failing_factory() {
  return [](const runner::Options&, const runner::ModelContext&) -> std::unique_ptr<runner::Model> {
    throw std::runtime_error("factory failed on purpose");
  };
}

void register_plugins(runner::Registrar& r) {
  const char* env = std::getenv("RUNNER_TEST_REGISTRATION");
  const std::string mode = env == nullptr ? "" : env;
  if (mode.empty()) {
    r.add_model("explodes", "a model whose factory throws (test plugin)", runner::OptionSchema{},
                failing_factory());
    r.add_model("nothing", "a model whose factory returns null (test plugin)",
                runner::OptionSchema{},
                [](const runner::Options&, const runner::ModelContext&)
                    -> std::unique_ptr<runner::Model> { return nullptr; });
    return;
  }
  r.add_model(mode == "empty_name" ? "" : "twice", "registered first (test plugin)",
              runner::OptionSchema{}, failing_factory());
  if (mode == "throw") throw std::runtime_error("registration failed on purpose");
  if (mode == "twice")
    r.add_model("twice", "registered again (test plugin)", runner::OptionSchema{},
                failing_factory());
  if (mode == "kernel")
    r.add_kernel("fused_op", "a kernel whose reference throws (test plugin)",
                 runner::OptionSchema{}, [](const runner::Options&) {
                   runner::KernelCase kernel;
                   kernel.reference = [](const runner::KernelInputs&) -> torch::Tensor {
                     throw std::runtime_error("reference failed on purpose");
                   };
                   return kernel;
                 });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
