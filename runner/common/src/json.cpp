#include "runner/common/json.hpp"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "runner/common/error.hpp"

namespace runner {

namespace {

using Json = nlohmann::json;

// nlohmann-json's own output, with invalid UTF-8 replaced instead of thrown.
std::string dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// nlohmann-json writes 0.0001 and 100000.0 where std::to_chars writes 1e-04
// and 1e+05; trial hashes have been computed over the latter since the first
// release, so floats keep it.
std::string float_text(double x) {
  if (!std::isfinite(x)) return "null";
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // "1" would read as an integer
  return text;
}

void write_canonical(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::value_t::object: {
      // nlohmann::json keeps members in a std::map: bytewise key order.
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.items()) {
        if (!first) out += ',';
        first = false;
        out += json_quote(key);
        out += ':';
        write_canonical(member, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (i > 0) out += ',';
        write_canonical(value[i], out);
      }
      out += ']';
      return;
    }
    case Json::value_t::number_float: out += float_text(value.get<double>()); return;
    default: out += dump(value);  // null, booleans, integers, strings
  }
}

[[noreturn]] void malformed(const std::string& what) {
  throw Error("malformed JSON: " + what, {}, ErrorKind::run);
}

}  // namespace

std::string json_quote(std::string_view text) { return dump(Json(text)); }

std::string canonical_json(const Json& value) {
  std::string out;
  write_canonical(value, out);
  return out;
}

Json parse_json(std::string_view text) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& error) {
    // parse_error, and out_of_range for a number no double can hold
    // (1e400): both mean the text is not JSON runner can read.
    // Strings that runner stored byte for byte before it used nlohmann-json
    // (environment variables in fingerprints) may hold invalid UTF-8, which
    // the parser refuses: read them as the writer now writes them, with U+FFFD.
    const std::string repaired = Json::parse(json_quote(text)).get<std::string>();
    if (repaired != text) {
      try {
        return Json::parse(repaired);
      } catch (const Json::exception&) {
      }
    }
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    const std::string what = error.what();
    const auto prefix_end = what.find("] ");
    malformed(prefix_end == std::string::npos ? what : what.substr(prefix_end + 2));
  }
}

std::map<std::string, std::string> parse_json_object(std::string_view text) {
  const Json value = parse_json(text);
  if (!value.is_object())
    malformed(std::string("expected an object of strings, found ") + value.type_name());
  std::map<std::string, std::string> out;
  for (const auto& [key, member] : value.items()) {
    if (!member.is_string())
      malformed("member " + json_quote(key) + " is " + member.type_name() + ", not a string");
    out.emplace(key, member.get<std::string>());
  }
  return out;
}

}  // namespace runner
