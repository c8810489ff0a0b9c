#include "plugin_options.hpp"

#include <exception>

#include "runner/common/error.hpp"

namespace runner::experiment_detail {

void check_option_rules(const PluginDescriptor& plugin, const PluginChoice& choice,
                        const std::string& section) {
  const std::string kind = to_string(plugin.kind);
  const std::string hint = "run 'runner plugins describe " + plugin.name + "' to see its options";
  for (const OptionCheck& check : plugin.schema.checks()) {
    try {
      check(choice.options);
    } catch (const OptionError& e) {
      throw Error(choice.where_of(e.option()),
                  "'" + section + "." + e.option() + "' of " + kind + " plugin '" + plugin.name +
                      "': " + e.what(),
                  hint);
    } catch (const std::exception& e) {
      // A check should name the option; one that does not still refuses the trial.
      throw Error(choice.where, kind + " plugin '" + plugin.name + "' refuses these options: " +
                                    e.what(),
                  hint);
    }
  }
}

}  // namespace runner::experiment_detail
