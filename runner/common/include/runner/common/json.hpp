// Minimal JSON output helpers (no parser): quoting per RFC 8259.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runner {

/// `text` as a JSON string literal, quotes included.
[[nodiscard]] std::string json_quote(std::string_view text);

/// A flat JSON object of string values, keys sorted (canonical for hashing).
[[nodiscard]] std::string json_object(const std::map<std::string, std::string>& fields);

/// Parses a flat JSON object of string values, as json_object() writes it.
/// Throws runner::Error (run kind) on anything else.
[[nodiscard]] std::map<std::string, std::string> parse_json_object(std::string_view text);

/// A parsed JSON value (what runner itself writes: objects, arrays, strings,
/// integers, floats, booleans, null). Integers and floats stay distinct: a
/// number with '.', 'e' or 'E' is a float.
struct JsonValue {
  enum class Type { null, boolean, integer, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  std::int64_t integer = 0;
  double number = 0;
  std::string text;                                        ///< string value, or a number's literal
  std::vector<JsonValue> items;                            ///< array items
  std::vector<std::pair<std::string, JsonValue>> members;  ///< object members, in document order

  /// The member `key` of an object, or nullptr.
  [[nodiscard]] const JsonValue* find(std::string_view key) const;
};

/// Parses one JSON document. Throws runner::Error (run kind) when malformed.
[[nodiscard]] JsonValue parse_json(std::string_view text);

}  // namespace runner
