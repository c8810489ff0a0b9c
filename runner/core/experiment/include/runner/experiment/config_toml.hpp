// A trial's resolved configuration (the canonical JSON that identifies it)
// written back as the TOML of an experiment file, for people to read and to
// run again: `runner report` shows it per trial; `runner rerun` writes its
// file with the same quoting.
#pragma once

#include <string>
#include <string_view>

namespace runner {

/// `config_json` as experiment TOML: the top-level values (kind, seed) under
/// [experiment], then one table per section with its plugin first and the
/// plugin's options as keys of the section, nested objects as sub-tables. A
/// value TOML cannot hold (null) becomes a comment. Throws runner::Error for
/// text that is not a JSON object.
[[nodiscard]] std::string config_toml(const std::string& config_json);

/// `text` as a TOML basic string: quoted, with quotes, backslashes and
/// control characters (DEL included) escaped.
[[nodiscard]] std::string toml_string(std::string_view text);
/// `key` bare when TOML allows it (letters, digits, '_', '-'), else quoted.
[[nodiscard]] std::string toml_key(const std::string& key);

}  // namespace runner
