// Minimal JSON output helpers (no parser): quoting per RFC 8259.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace runner {

/// `text` as a JSON string literal, quotes included.
[[nodiscard]] std::string json_quote(std::string_view text);

/// A flat JSON object of string values, keys sorted (canonical for hashing).
[[nodiscard]] std::string json_object(const std::map<std::string, std::string>& fields);

/// Parses a flat JSON object of string values, as json_object() writes it.
/// Throws runner::Error (run kind) on anything else.
[[nodiscard]] std::map<std::string, std::string> parse_json_object(std::string_view text);

}  // namespace runner
