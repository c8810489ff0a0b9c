// How TOML values are read, described and located in messages (format.hpp).
#include "format.hpp"

#include "limits.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <cstdio>
#include <sstream>
#include <utility>

#include "runner/common/json.hpp"
#include "runner/common/strings.hpp"

namespace runner::experiment::detail {

// ---------------------------------------------------------------------------------

std::string shortest(double x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

const char* describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string render(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return toml_quote(node.as_string()->get());
    case toml::node_type::integer: return std::to_string(node.as_integer()->get());
    case toml::node_type::floating_point: {
      const double x = node.as_floating_point()->get();
      if (std::isnan(x)) return "nan";
      if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
      std::string text = shortest(x);
      // "1" would read back as an integer.
      if (text.find_first_of(".e") == std::string::npos) text += ".0";
      return text;
    }
    case toml::node_type::boolean: return node.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array: {
      std::string out = "[";
      const toml::array& array = *node.as_array();
      for (std::size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out += ", ";
        out += render(*array.get(i));
      }
      return out + "]";
    }
    case toml::node_type::table: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : *node.as_table()) {
        out += first ? " " : ", ";
        first = false;
        out += std::string(key.str()) + " = " + render(value);
      }
      return out + (first ? "}" : " }");
    }
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: {
      std::ostringstream out;
      node.visit([&](const auto& value) { out << value; });
      return out.str();
    }
    case toml::node_type::none: break;
  }
  return "?";
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& item : items) quoted.push_back(json_quote(item));
  return join(quoted, ", ");
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        // TOML forbids raw control characters, DEL included.
        if (u < 0x20 || u == 0x7f) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04X", static_cast<unsigned>(u));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::optional<double> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) != 0)) ++i;
    if (i == start) return std::nullopt;
    if (i < text.size() && text[i] == '.') {
      ++i;
      const std::size_t fraction = i;
      while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) != 0)) ++i;
      if (i == fraction) return std::nullopt;
    }
    double amount = 0;
    const auto parsed = std::from_chars(text.data() + start, text.data() + i, amount);
    if (parsed.ec != std::errc()) return std::nullopt;
    double unit = 0;
    if (text.substr(i, 2) == "ms") {
      unit = 0.001;
      i += 2;
    } else if (i < text.size() && text[i] == 'h') {
      unit = 3600;
      ++i;
    } else if (i < text.size() && text[i] == 'm') {
      unit = 60;
      ++i;
    } else if (i < text.size() && text[i] == 's') {
      unit = 1;
      ++i;
    } else {
      return std::nullopt;  // every number needs its unit
    }
    total += amount * unit;
  }
  if (!std::isfinite(total)) return std::nullopt;
  return total;
}

// ---------------------------------------------------------------------------------

const Origin& Origins::add(const toml::source_path_ptr& source, Origin origin) {
  return by_source_[source.get()] = std::move(origin);
}

const Origin* Origins::find(const toml::node& node) const {
  const auto it = by_source_.find(node.source().path.get());
  return it == by_source_.end() ? nullptr : &it->second;
}

bool before(const toml::source_position& a, const toml::source_position& b) {
  return a.line != b.line ? a.line < b.line : a.column < b.column;
}

toml::source_position start_of(const toml::key* key, const toml::node& node) {
  const auto& n = node.source().begin;
  if (key == nullptr) return n;
  const auto& k = key->source().begin;
  if (k.line == 0) return n;
  if (n.line == 0) return k;
  return before(n, k) ? n : k;
}

const Origin* Checker::origin_of(const toml::node& node) const {
  return origins_ != nullptr ? origins_->find(node) : nullptr;
}

SourceLocation Checker::at(const toml::key* key, const toml::node& node) const {
  const Origin* origin = origin_of(node);
  if (origin == nullptr) return nowhere();
  if (origin->command_line) return SourceLocation{origin->shown, 0, 0};
  const toml::source_position pos = start_of(key, node);
  return SourceLocation{origin->shown, static_cast<int>(pos.line), static_cast<int>(pos.column)};
}

Error Checker::error(const toml::key* key, const toml::node& node, const std::string& message,
                     const std::string& hint) const {
  const Origin* origin = origin_of(node);
  return Error(at(key, node), origin != nullptr ? message + origin->chain : message, hint);
}

OptionValue Checker::read(const OptionSpec& spec, const toml::node& node,
                          const std::string& dotted, const std::string& hint) const {
  switch (spec.type) {
    case OptionType::boolean:
      if (const auto* b = node.as_boolean()) return b->get();
      break;
    case OptionType::integer:
      if (const auto* i = node.as_integer()) {
        check_range(spec, static_cast<double>(i->get()), std::to_string(i->get()), node, dotted,
                    hint);
        check_integer_choice(spec, i->get(), node, dotted, hint);
        return i->get();
      }
      break;
    case OptionType::number:
      if (node.is_number()) return read_number(spec, node, dotted, hint);
      break;
    case OptionType::string:
      if (const auto* s = node.as_string()) {
        const std::string& text = s->get();
        if (!spec.choices.empty() &&
            std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end())
          fail(node, "'" + dotted + "' must be one of " + quoted_list(spec.choices) +
                         ", found " + json_quote(text), hint);
        return text;
      }
      break;
    case OptionType::integer_list:
      if (const auto* array = node.as_array()) {
        check_items(spec, *array, dotted, hint);
        std::vector<std::int64_t> items;
        for (std::size_t i = 0; i < array->size(); ++i) {
          const toml::node& item = *array->get(i);
          const std::string name = dotted + "[" + std::to_string(i) + "]";
          const auto* integer = item.as_integer();
          if (integer == nullptr)
            fail(item, "'" + name + "' must be an integer, found " + describe(item), hint);
          check_range(spec, static_cast<double>(integer->get()), std::to_string(integer->get()),
                      item, name, hint);
          check_integer_choice(spec, integer->get(), item, name, hint);
          items.push_back(integer->get());
        }
        return items;
      }
      break;
    case OptionType::number_list:
      if (const auto* array = node.as_array()) {
        check_items(spec, *array, dotted, hint);
        std::vector<double> items;
        for (std::size_t i = 0; i < array->size(); ++i) {
          const toml::node& item = *array->get(i);
          const std::string name = dotted + "[" + std::to_string(i) + "]";
          if (!item.is_number())
            fail(item, "'" + name + "' must be a number, found " + describe(item), hint);
          items.push_back(read_number(spec, item, name, hint));
        }
        return items;
      }
      break;
    case OptionType::string_list:
      if (const auto* array = node.as_array()) {
        check_items(spec, *array, dotted, hint);
        std::vector<std::string> items;
        for (std::size_t i = 0; i < array->size(); ++i) {
          const toml::node& item = *array->get(i);
          const std::string name = dotted + "[" + std::to_string(i) + "]";
          const auto* text = item.as_string();
          if (text == nullptr)
            fail(item, "'" + name + "' must be a string, found " + describe(item), hint);
          if (!spec.choices.empty() &&
              std::find(spec.choices.begin(), spec.choices.end(), text->get()) ==
                  spec.choices.end())
            fail(item, "'" + name + "' must be one of " + quoted_list(spec.choices) +
                           ", found " + json_quote(text->get()), hint);
          items.push_back(text->get());
        }
        return items;
      }
      break;
  }
  fail(node, "'" + dotted + "' must be " + runner::describe(spec.type) + ", found " +
                 describe(node), hint);
}

double Checker::read_duration(const toml::node& node, const std::string& dotted,
                              double min_seconds, double max_seconds) const {
  std::optional<double> seconds;
  std::string found = describe(node);
  if (const auto* text = node.as_string()) {
    seconds = parse_duration(text->get());
    found = json_quote(text->get());
  } else if (const auto* integer = node.as_integer()) {
    seconds = static_cast<double>(integer->get());
    found = std::to_string(integer->get());
  } else if (const auto* number = node.as_floating_point()) {
    seconds = number->get();
    found = render(node);
  }
  if (seconds && std::isfinite(*seconds) && *seconds >= min_seconds && *seconds <= max_seconds)
    return *seconds;
  fail(node, "'" + dotted + "' must be a duration like \"90s\", \"30m\" or \"2h\" from " +
                 shortest(min_seconds) + " to " + shortest(max_seconds) + " seconds, found " +
                 found);
}

std::int64_t Checker::read_warmup(const toml::node& node, const std::string& dotted) const {
  if (const auto* text = node.as_string(); text != nullptr && text->get() == "auto") return -1;
  if (const auto* integer = node.as_integer();
      integer != nullptr && integer->get() >= 0 && integer->get() <= kMaxSteps)
    return integer->get();
  std::string found = describe(node);
  if (const auto* text = node.as_string()) found = json_quote(text->get());
  if (const auto* integer = node.as_integer()) found = std::to_string(integer->get());
  fail(node, "'" + dotted + "' must be a step count between 0 and " + std::to_string(kMaxSteps) +
                 " or \"auto\", found " + found);
}

std::int64_t Checker::read_repeats(const toml::node& node, const std::string& dotted) const {
  if (const auto* text = node.as_string(); text != nullptr && text->get() == "auto") return -1;
  if (const auto* integer = node.as_integer();
      integer != nullptr && integer->get() >= 1 && integer->get() <= kMaxRepeats)
    return integer->get();
  if (const auto* integer = node.as_integer())
    fail(node, "'" + dotted + "' must be between 1 and " + std::to_string(kMaxRepeats) +
                   ", found " + std::to_string(integer->get()));
  std::string found = describe(node);
  if (const auto* text = node.as_string()) found = json_quote(text->get());
  fail(node, "'" + dotted + "' must be a count between 1 and " + std::to_string(kMaxRepeats) +
                 " or \"auto\", found " + found,
       "\"auto\" runs rounds from min_repeats to max_repeats until every [[expect]] is "
       "decided");
}

// Integers are accepted where a number is expected: `lr = 1` is a number.
double Checker::read_number(const OptionSpec& spec, const toml::node& node,
                            const std::string& dotted, const std::string& hint) const {
  const double x = node.is_integer() ? static_cast<double>(node.as_integer()->get())
                                     : node.as_floating_point()->get();
  // nan and inf have no JSON form and make every range check vacuous.
  if (!std::isfinite(x))
    fail(node, "'" + dotted + "' must be a finite number, found " +
                   (std::isnan(x) ? std::string("nan") : shortest(x)), hint);
  check_range(spec, x, shortest(x), node, dotted, hint);
  return x;
}

void Checker::check_integer_choice(const OptionSpec& spec, std::int64_t value,
                                   const toml::node& node, const std::string& dotted,
                                   const std::string& hint) const {
  const auto& allowed = spec.integer_choices;
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::vector<std::string> shown;
  for (const std::int64_t choice : allowed) shown.push_back(std::to_string(choice));
  fail(node, "'" + dotted + "' must be one of " + join(shown, ", ") + ", found " +
                 std::to_string(value), hint);
}

void Checker::check_range(const OptionSpec& spec, double x, const std::string& found,
                          const toml::node& node, const std::string& dotted,
                          const std::string& hint) const {
  const bool low = spec.min && x < *spec.min;
  const bool high = spec.max && x > *spec.max;
  if (!low && !high) return;
  // Bounds of integer options read as integers: "between 1 and 1000000".
  const bool integral =
      spec.type == OptionType::integer || spec.type == OptionType::integer_list;
  const auto show = [integral](double bound) {
    return integral ? std::to_string(static_cast<std::int64_t>(bound)) : shortest(bound);
  };
  std::string bound;
  if (spec.min && spec.max)
    bound = "between " + show(*spec.min) + " and " + show(*spec.max);
  else if (spec.min)
    bound = ">= " + show(*spec.min);
  else
    bound = "<= " + show(*spec.max);
  fail(node, "'" + dotted + "' must be " + bound + ", found " + found, hint);
}

void Checker::check_items(const OptionSpec& spec, const toml::array& array,
                          const std::string& dotted, const std::string& hint) const {
  const std::size_t found = array.size();
  // Whatever a plugin declares, a list is bounded: a million items validated
  // and then exhausted or crashed the run process.
  const std::size_t most = std::min(spec.max_items.value_or(kMaxListItems), kMaxListItems);
  if (found >= spec.min_items && found <= most) return;
  auto items = [](std::size_t n) { return std::to_string(n) + (n == 1 ? " item" : " items"); };
  std::string bound;
  if (!spec.max_items && found < spec.min_items)
    bound = "at least " + items(spec.min_items);  // the cap is beside the point
  else if (most == spec.min_items)
    bound = "exactly " + items(spec.min_items);
  else if (spec.min_items > 0)
    bound = "between " + std::to_string(spec.min_items) + " and " + items(most);
  else
    bound = "at most " + items(most);
  fail(array, "'" + dotted + "' must have " + bound + ", found " + std::to_string(found), hint);
}

}  // namespace runner::experiment::detail
