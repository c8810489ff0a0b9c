#include "runner/common/strings.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace runner {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows: swapping two neighbours ("modle" for "model", "mpl" for
  // "mlp") is the most common typo and must count as one edit, not two.
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (d <= limit && d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t at = text.find(from); !from.empty() && at != std::string_view::npos;
       at = text.find(from, start)) {
    out.append(text.substr(start, at - start)).append(to);
    start = at + from.size();
  }
  out.append(text.substr(start));
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::string shape_text(std::span<const std::int64_t> shape) {
  std::vector<std::string> parts;
  for (const std::int64_t s : shape) parts.push_back(std::to_string(s));
  return "[" + join(parts, ", ") + "]";
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(text.substr(start));
      return out;
    }
    out.emplace_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

namespace {

template <typename T>
std::optional<T> parse_whole(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::int64_t> parse_int64(std::string_view text) {
  return parse_whole<std::int64_t>(text);
}

std::optional<double> parse_double(std::string_view text) { return parse_whole<double>(text); }

bool has_control_character(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20U || c == 0x7FU) return true;
    if (c == 0xC2U && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0U &&
        static_cast<unsigned char>(text[i + 1]) >= 0x80U)
      return true;
  }
  return false;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string((s % 3600) / 60) + "m";
}

// --- text safe for a terminal ---------------------------------------------------------
namespace {

void append_escape(std::string& out, unsigned value, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += digits == 2 ? "\\x" : "\\u";
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kHex[(value >> shift) & 0xFU];
}

// The length of the UTF-8 sequence starting at text[i], or 0 if it is not one.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  const std::size_t length = c >= 0xC2U && c <= 0xDFU   ? 2
                             : c >= 0xE0U && c <= 0xEFU ? 3
                             : c >= 0xF0U && c <= 0xF4U ? 4
                                                        : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k)
    if ((byte(i + k) & 0xC0U) != 0x80U) return 0;
  return length;
}

std::string escaped(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20U && c < 0x7FU) || (keep_newlines && c == '\n')) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80U) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case 0x1BU: out += "\\e"; break;
        default: append_escape(out, c, 2);
      }
      ++i;
      continue;
    }
    const std::size_t length = utf8_length(text, i);
    if (length == 0) {
      append_escape(out, c, 2);  // not UTF-8: shown byte by byte
      ++i;
      continue;
    }
    // C1 controls (U+0080..U+009F) act as escapes on some terminals.
    if (length == 2 && c == 0xC2U && static_cast<unsigned char>(text[i + 1]) < 0xA0U) {
      append_escape(out, static_cast<unsigned char>(text[i + 1]), 4);
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace

std::string terminal_safe(std::string_view text) { return escaped(text, false); }

std::string terminal_safe_lines(std::string_view text) { return escaped(text, true); }

}  // namespace runner
