// How the engine reports errors (errors.hpp): at the experiment's key
// responsible, and without LibTorch's C++ backtrace.
#include "errors.hpp"

#include <c10/util/Exception.h>

#include <string>

namespace runner {

[[noreturn]] void rethrow_at_option(const PluginOptionError& e, const PluginChoice& choice) {
  const std::string section = section_of(e.plugin_kind());
  throw Error(choice.where_of(e.option()),
              "'" + section + "." + e.option() + "' of " + section + " plugin '" + choice.plugin +
                  "': " + e.detail(),
              "run 'runner plugins describe " + choice.plugin + "' to see its options");
}

[[noreturn]] void rethrow_at_key(const AugmentError& e, const Experiment& exp) {
  throw Error(exp.where_of("data." + e.key()), e.what(), e.hint());
}

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace runner
