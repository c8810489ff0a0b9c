#include "runner/common/json.hpp"

#include <cstdio>

#include "runner/common/error.hpp"

namespace runner {

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string json_object(const std::map<std::string, std::string>& fields) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : fields) {
    if (!first) out += ',';
    first = false;
    out += json_quote(key);
    out += ':';
    out += json_quote(value);
  }
  out += '}';
  return out;
}

namespace {

class FlatJsonReader {
 public:
  explicit FlatJsonReader(std::string_view text) : text_(text) {}

  std::map<std::string, std::string> object() {
    std::map<std::string, std::string> out;
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return out;
    }
    while (true) {
      std::string key = string();
      expect(':');
      out[std::move(key)] = string();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return out;
    }
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("malformed JSON at offset " + std::to_string(pos_) + ": " + what, {},
                ErrorKind::run);
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          const unsigned code = static_cast<unsigned>(
              std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16));
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail("unknown escape");
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::map<std::string, std::string> parse_json_object(std::string_view text) {
  return FlatJsonReader(text).object();
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [name, value] : members)
    if (name == key) return &value;
  return nullptr;
}

namespace {

// Recursive descent over the whole grammar; strings reuse the flat reader's
// escape handling by parsing a one-member object around them would be
// clumsy, so the scanner below is self-contained.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("malformed JSON at offset " + std::to_string(pos_) + ": " + what, {},
                ErrorKind::run);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    JsonValue v;
    const char c = text_[pos_];
    if (c == '{') {
      v.type = JsonValue::Type::object;
      ++pos_;
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a member name");
        std::string key = string();
        skip_space();
        if (!consume(":")) fail("expected ':'");
        v.members.emplace_back(std::move(key), value(depth + 1));
        skip_space();
        if (consume(",")) continue;
        if (consume("}")) return v;
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.type = JsonValue::Type::array;
      ++pos_;
      skip_space();
      if (consume("]")) return v;
      while (true) {
        v.items.push_back(value(depth + 1));
        skip_space();
        if (consume(",")) continue;
        if (consume("]")) return v;
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.type = JsonValue::Type::string;
      v.text = string();
      return v;
    }
    if (consume("true")) {
      v.type = JsonValue::Type::boolean;
      v.boolean = true;
      return v;
    }
    if (consume("false")) {
      v.type = JsonValue::Type::boolean;
      return v;
    }
    if (consume("null")) return v;
    return number();
  }

  JsonValue number() {
    const std::size_t start = pos_;
    bool is_float = false;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_float = true;
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ == start) fail("unexpected character");
    JsonValue v;
    v.text = std::string(text_.substr(start, pos_ - start));
    try {
      std::size_t used = 0;
      if (is_float) {
        v.type = JsonValue::Type::number;
        v.number = std::stod(v.text, &used);
      } else {
        v.type = JsonValue::Type::integer;
        v.integer = std::stoll(v.text, &used);
        v.number = static_cast<double>(v.integer);
      }
      if (used != v.text.size()) fail("bad number '" + v.text + "'");
    } catch (const std::logic_error&) {
      fail("bad number '" + v.text + "'");
    }
    return v;
  }

  std::string string() {
    // Reuse the flat reader for the escape rules: wrap the literal in an object.
    const std::size_t start = pos_;
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= text_.size()) fail("unterminated string");
    ++pos_;
    const std::string literal(text_.substr(start, pos_ - start));
    return FlatJsonReader("{" + literal + ":\"\"}").object().begin()->first;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text) { return JsonReader(text).document(); }

}  // namespace runner
