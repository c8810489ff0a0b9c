// Fuzz target for what runner parses out of a store it did not necessarily
// write (a merge input, a database edited by another client): the JSON of
// fingerprints and trial configurations. SQLite parses the file itself; these
// columns are runner's own parsing. Only runner::Error may escape.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runner/common/error.hpp"
#include "runner/common/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)runner::parse_json_object(text);
  } catch (const runner::Error&) {
  }
  try {
    const nlohmann::json value = runner::parse_json(text);
    // What the canonical writer makes of any parsed value must parse back to it.
    const std::string canonical = runner::canonical_json(value);
    if (runner::parse_json(canonical) != value) __builtin_trap();
  } catch (const runner::Error&) {
  }
  return 0;
}
