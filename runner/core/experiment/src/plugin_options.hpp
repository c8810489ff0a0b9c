// A plugin's table in an experiment resolved against the plugin's declared
// options (ParsedExperiment::resolve_plugin, in plugin_options.cpp), and the
// rules the plugin states over its options taken together (OptionSchema's
// checks), applied to one trial's resolved options.
#pragma once

#include <string>

#include "runner/experiment/catalog.hpp"
#include "runner/experiment/experiment.hpp"

namespace runner::experiment::detail {

/// The hint of every error about a plugin's options: where to read them.
[[nodiscard]] std::string describe_hint(const std::string& plugin);

/// Runs every check `plugin` declares over `choice`'s options (section
/// `section`). A runner::OptionError is thrown as runner::Error (input) at
/// that option's file:line:col (at the plugin's line when the option was left
/// at its default): "'model.width' of model plugin 'transformer_lm': ...";
/// anything else a check throws is reported at the plugin's line.
void check_option_rules(const PluginDescriptor& plugin, const PluginChoice& choice,
                        const std::string& section);

}  // namespace runner::experiment::detail
