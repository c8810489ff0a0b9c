#include "runner/common/labels.hpp"

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"

namespace runner {

namespace {

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool is_key_character(char c) {
  return is_letter(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

}  // namespace

std::string label_key_problem(std::string_view key) {
  // The key reaches a selector (label:KEY=VALUE), an export column
  // (label.KEY) and a shell: no '=', ':', ',', spaces or quotes.
  if (key.empty()) return "must not be empty";
  if (key.size() > kMaxLabelKeyBytes)
    return "is longer than " + std::to_string(kMaxLabelKeyBytes) + " bytes";
  if (!is_letter(key.front())) return "must start with a letter";
  for (const char c : key)
    if (!is_key_character(c)) return "may hold only letters, digits, '_', '-' and '.'";
  return {};
}

std::string label_value_problem(std::string_view value) {
  if (value.empty()) return "must not be empty";
  if (value.size() > kMaxLabelValueBytes)
    return "is longer than " + std::to_string(kMaxLabelValueBytes) + " bytes";
  // terminal_safe() leaves printable UTF-8 as it is and escapes the rest.
  if (terminal_safe(value) != value) return "must be printable text (no control characters, UTF-8)";
  return {};
}

std::string labels_problem(const Labels& labels) {
  if (labels.size() > kMaxLabels)
    return std::to_string(labels.size()) + " labels, at most " + std::to_string(kMaxLabels);
  for (const auto& [key, value] : labels) {
    if (const std::string p = label_key_problem(key); !p.empty())
      return "label key '" + terminal_safe(key) + "' " + p;
    if (const std::string p = label_value_problem(value); !p.empty())
      return "label '" + key + "': the value " + p;
  }
  return {};
}

std::pair<std::string, std::string> parse_label_argument(std::string_view argument) {
  const std::string shown = "--label " + terminal_safe(argument);
  const auto eq = argument.find('=');
  if (eq == std::string_view::npos)
    throw Error(shown + ": expected KEY=VALUE", "e.g. --label commit=$(git rev-parse HEAD)");
  std::string key(argument.substr(0, eq));
  std::string value(argument.substr(eq + 1));
  if (const std::string p = label_key_problem(key); !p.empty())
    throw Error(shown + ": the key '" + terminal_safe(key) + "' " + p,
                "a key is a letter followed by letters, digits, '_', '-' or '.', at most " +
                    std::to_string(kMaxLabelKeyBytes) + " bytes (e.g. commit, branch, build)");
  if (const std::string p = label_value_problem(value); !p.empty())
    throw Error(shown + ": the value of '" + key + "' " + p,
                "a value is one line of printable text, 1 to " +
                    std::to_string(kMaxLabelValueBytes) + " bytes");
  return {std::move(key), std::move(value)};
}

std::string labels_text(const Labels& labels) {
  std::string out;
  for (const auto& [key, value] : labels)
    out += (out.empty() ? "" : " ") + key + "=" + terminal_safe(value);
  return out;
}

Labels resolve_labels(const Labels& file, const Labels& command_line, const EnvLookup& getenv) {
  Labels out = file;
  for (const auto& [key, value] : command_line) out[key] = value;
  if (out.count("commit") == 0) {
    for (const char* name : kCommitVariables) {
      const char* value = getenv ? getenv(name) : nullptr;
      if (value == nullptr || *value == '\0') continue;
      if (const std::string p = label_value_problem(value); !p.empty())
        throw Error("the label commit from $" + std::string(name) + " " + p,
                    "unset it, or give the label yourself: --label commit=VALUE");
      out["commit"] = value;
      break;
    }
  }
  if (const std::string p = labels_problem(out); !p.empty())
    throw Error("cannot label the runs: " + p, "at most " + std::to_string(kMaxLabels) +
                                                   " labels; see 'runner run --help'");
  return out;
}

}  // namespace runner
