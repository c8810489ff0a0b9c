// A trial's resolved configuration (the canonical JSON that identifies it)
// written back as the TOML of an experiment file, for people to read and to
// run again: `runner report` shows it per trial.
#pragma once

#include <string>

namespace runner {

/// `config_json` as experiment TOML: the top-level values (kind, seed) under
/// [experiment], then one table per section with its plugin first and the
/// plugin's options as keys of the section, nested objects as sub-tables. A
/// value TOML cannot hold (null) becomes a comment. Throws runner::Error for
/// text that is not a JSON object.
[[nodiscard]] std::string config_toml(const std::string& config_json);

}  // namespace runner
