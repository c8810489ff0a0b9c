// Reading the commands README.md and the experiment headers print.
#include "support/shipped_commands.hpp"

#include <fstream>
#include <stdexcept>

namespace runner::test {

namespace {

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") + 1 - first);
}

// A command's own text: what follows an unquoted " #" is a remark for the reader.
std::string without_remark(const std::string& s) {
  char quote = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (quote) {
      if (s[i] == quote) quote = 0;
    } else if (s[i] == '\'' || s[i] == '"') {
      quote = s[i];
    } else if (s[i] == '#' && i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return trim(s.substr(0, i));
    }
  }
  return trim(s);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_program(const std::string& word) {
  for (const char* program : {"runner", "runner-export", "torchrun", "python", "python3"})
    if (word == program || ends_with(word, std::string("/") + program)) return true;
  return false;
}

// Joins `lines[i]` with the lines its trailing backslashes continue to;
// `strip` turns a raw line into its text. Advances `i` to the last line used.
std::string joined(const std::vector<std::string>& lines, std::size_t& i,
                   std::string (*strip)(const std::string&)) {
  std::string text = without_remark(strip(lines[i]));
  while (!text.empty() && text.back() == '\\' && i + 1 < lines.size()) {
    text = trim(text.substr(0, text.size() - 1)) + " " + without_remark(strip(lines[++i]));
  }
  return text;
}

std::string comment_text(const std::string& line) {
  const auto hash = line.find('#');
  return hash == std::string::npos ? line : line.substr(hash + 1);
}

std::string as_is(const std::string& line) { return line; }

}  // namespace

std::vector<std::string> header_lines(const std::filesystem::path& toml) {
  std::vector<std::string> out;
  for (const std::string& line : read_lines(toml)) {
    const std::string t = trim(line);
    if (t.empty()) continue;
    if (t[0] != '#') break;
    out.push_back(t.substr(1));
  }
  return out;
}

std::vector<ShippedCommand> header_commands(const std::filesystem::path& toml) {
  const std::vector<std::string> lines = read_lines(toml);
  std::vector<ShippedCommand> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (t.empty()) continue;
    if (t[0] != '#') break;
    const std::string text = comment_text(lines[i]);
    // Prose starts one space after the '#'; a command is indented further.
    if (text.rfind("  ", 0) != 0) continue;
    const std::vector<std::string> words = shell_words(trim(text));
    if (words.empty() || !is_program(words[0])) continue;
    const int first = static_cast<int>(i) + 1;
    out.push_back({joined(lines, i, comment_text), toml, first});
  }
  return out;
}

std::vector<ShippedCommand> readme_commands(const std::filesystem::path& markdown) {
  const std::vector<std::string> lines = read_lines(markdown);
  std::vector<ShippedCommand> out;
  bool in_sh = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (t.rfind("```", 0) == 0) {
      in_sh = !in_sh && t == "```sh";
      continue;
    }
    if (!in_sh || t.empty() || t[0] == '#') continue;  // a line that is only a remark
    const int first = static_cast<int>(i) + 1;
    out.push_back({joined(lines, i, as_is), markdown, first});
  }
  return out;
}

std::vector<std::string> shell_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (const char c : command) {
    if (quote) {
      if (c == quote) quote = 0;
      else word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

std::optional<CompareCommand> parse_compare(const std::string& command) {
  const std::vector<std::string> words = shell_words(command);
  if (words.size() < 2 || !is_program(words[0]) || words[1] != "compare") return std::nullopt;
  CompareCommand c;
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool has_value = i + 1 < words.size();
    if (w == "--by" && has_value) {
      c.by = words[++i];
    } else if (w == "--baseline" && has_value) {
      c.baseline = words[++i];
    } else if (w == "--versus" && has_value) {
      c.versus = words[++i];
    } else if (w == "--where" && has_value) {
      const std::string& kv = words[++i];
      const auto eq = kv.find('=');
      c.where.emplace_back(kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
    } else if (w == "--pairs") {
      c.pairs = true;
    } else if (w == "--all-differences" || w == "--help") {
      // flags without a value and without a bearing on the sides
    } else if (w.rfind("--", 0) == 0) {
      if (has_value) ++i;  // --db PATH, --margin PCT, --format F, --fail-above PCT, ...
    } else {
      c.selectors.push_back(w);
    }
  }
  return c;
}

}  // namespace runner::test
