// JSON is nlohmann-json (include <nlohmann/json.hpp> where a value is built
// or read); this header adds what runner needs on top of it: the canonical
// text that trial and fingerprint hashes are computed over, and parse errors
// as runner::Error. No LibTorch.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace runner {

/// `text` as a JSON string literal, quotes included: '"', '\\' and control
/// characters escaped (\n, \u0001, ...), other bytes unchanged, except that
/// invalid UTF-8 becomes U+FFFD.
[[nodiscard]] std::string json_quote(std::string_view text);

/// The canonical text of `value`, which trial and fingerprint hashes are
/// computed over (equal values give equal bytes): no whitespace, object keys
/// in bytewise order, strings as json_quote() writes them, floats in the
/// shortest form that reads back exactly and always with a '.' or an
/// exponent (1.0, 1e-05), so that they read back as floats. Non-finite
/// floats, which JSON cannot express, are written as null.
[[nodiscard]] std::string canonical_json(const nlohmann::json& value);

/// Parses one JSON document; integers and floats stay distinct (a number
/// with '.', 'e' or 'E' is a float). Invalid UTF-8 in strings (written by
/// runner before it used nlohmann-json) reads as U+FFFD. Throws runner::Error
/// (run kind) when `text` is not JSON.
[[nodiscard]] nlohmann::json parse_json(std::string_view text);

/// Parses a flat object of string values (a stored fingerprint). Throws
/// runner::Error (run kind) on anything else.
[[nodiscard]] std::map<std::string, std::string> parse_json_object(std::string_view text);

}  // namespace runner
