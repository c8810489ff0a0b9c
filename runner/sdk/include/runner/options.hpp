// Plugin options: every plugin declares the options it takes (name, type,
// default, one-line doc, constraints); the host validates an experiment's
// table against the declaration before the plugin is ever called, and hands
// the plugin an `Options` holding exactly the declared keys.
//
//   runner::OptionSchema schema;
//   schema.integer("hidden", 128, "width of each hidden layer").range(1, 65536);
//   schema.string("activation", "relu", "non-linearity").choices({"relu", "gelu"});
//   ...
//   int64_t hidden = options.integer("hidden");
//
// This header does not include LibTorch: the experiment layer uses it too.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace runner {

/// The five kinds of plugin a library can register.
enum class PluginKind { model, optimizer, loader, kernel, comm_hook };

/// Lowercase name of a plugin kind ("model", "comm_hook", ...).
inline const char* to_string(PluginKind kind) {
  switch (kind) {
    case PluginKind::model: return "model";
    case PluginKind::optimizer: return "optimizer";
    case PluginKind::loader: return "loader";
    case PluginKind::kernel: return "kernel";
    case PluginKind::comm_hook: return "comm_hook";
  }
  return "?";
}

/// The type of an option value as written in TOML.
enum class OptionType { boolean, integer, number, string, integer_list, number_list };

/// Name of an option type as users see it in messages ("an integer", ...).
inline const char* describe(OptionType type) {
  switch (type) {
    case OptionType::boolean: return "a boolean";
    case OptionType::integer: return "an integer";
    case OptionType::number: return "a number";
    case OptionType::string: return "a string";
    case OptionType::integer_list: return "a list of integers";
    case OptionType::number_list: return "a list of numbers";
  }
  return "?";
}

/// Short type name for tables ("int", "float", ...).
inline const char* short_name(OptionType type) {
  switch (type) {
    case OptionType::boolean: return "bool";
    case OptionType::integer: return "int";
    case OptionType::number: return "float";
    case OptionType::string: return "string";
    case OptionType::integer_list: return "int[]";
    case OptionType::number_list: return "float[]";
  }
  return "?";
}

/// One option value; the alternative always matches the declared OptionType
/// (integers given for a number option are converted to double by the host).
using OptionValue = std::variant<bool, std::int64_t, double, std::string,
                                 std::vector<std::int64_t>, std::vector<double>>;

/// The OptionType an OptionValue holds.
inline OptionType type_of(const OptionValue& value) {
  return static_cast<OptionType>(value.index());
}

/// TOML-like rendering of a value: true, 3, 0.1, "relu", [1, 2].
inline std::string to_string(const OptionValue& value) {
  auto number = [](double x) {
    std::string s = std::to_string(x);
    if (std::isfinite(x) && s.find('.') != std::string::npos) {
      while (!s.empty() && s.back() == '0') s.pop_back();
      if (!s.empty() && s.back() == '.') s += '0';
    }
    return s;
  };
  struct Visitor {
    decltype(number)& num;
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return num(d); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<double>& v) const {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + num(v[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{number}, value);
}

/// Declaration of one option: name, type, default (absent = required),
/// one-line doc, and constraints. Built through OptionSchema's fluent adders.
struct OptionSpec {
  std::string name;                        ///< key in the plugin's TOML table
  OptionType type = OptionType::integer;   ///< expected type
  std::optional<OptionValue> default_value;  ///< empty: the option is required
  std::string doc;                         ///< one line, shown by `runner plugins describe`
  std::optional<double> min;               ///< inclusive lower bound (numbers, integers, list items)
  std::optional<double> max;               ///< inclusive upper bound (numbers, integers, list items)
  std::vector<std::string> choices;        ///< allowed values of a string option (empty: any)
  std::size_t min_items = 0;               ///< lists: fewest items allowed

  /// Inclusive range for numbers, integers, and each item of a list.
  OptionSpec& range(std::optional<double> lo, std::optional<double> hi) {
    min = lo;
    max = hi;
    return *this;
  }
  /// Allowed values of a string option.
  OptionSpec& one_of(std::vector<std::string> allowed) {
    choices = std::move(allowed);
    return *this;
  }
  /// Lists: the fewest items allowed.
  OptionSpec& at_least(std::size_t items) {
    min_items = items;
    return *this;
  }
  /// Removes the default: the experiment must set this option.
  OptionSpec& required() {
    default_value.reset();
    return *this;
  }
};

/// The ordered set of options a plugin declares.
class OptionSchema {
 public:
  /// Declares a boolean option.
  OptionSpec& boolean(std::string name, bool def, std::string doc) {
    return add(std::move(name), OptionType::boolean, OptionValue{def}, std::move(doc));
  }
  /// Declares an integer option.
  OptionSpec& integer(std::string name, std::int64_t def, std::string doc) {
    return add(std::move(name), OptionType::integer, OptionValue{def}, std::move(doc));
  }
  /// Declares a floating-point option (TOML integers are accepted and converted).
  OptionSpec& number(std::string name, double def, std::string doc) {
    return add(std::move(name), OptionType::number, OptionValue{def}, std::move(doc));
  }
  /// Declares a string option.
  OptionSpec& string(std::string name, std::string def, std::string doc) {
    return add(std::move(name), OptionType::string, OptionValue{std::move(def)}, std::move(doc));
  }
  /// Declares a list-of-integers option.
  OptionSpec& integers(std::string name, std::vector<std::int64_t> def, std::string doc) {
    return add(std::move(name), OptionType::integer_list, OptionValue{std::move(def)},
               std::move(doc));
  }
  /// Declares a list-of-numbers option.
  OptionSpec& numbers(std::string name, std::vector<double> def, std::string doc) {
    return add(std::move(name), OptionType::number_list, OptionValue{std::move(def)},
               std::move(doc));
  }

  /// All declarations, in declaration order.
  [[nodiscard]] const std::vector<OptionSpec>& specs() const { return specs_; }
  /// The declaration of `name`, or nullptr.
  [[nodiscard]] const OptionSpec* find(const std::string& name) const {
    for (const auto& spec : specs_)
      if (spec.name == name) return &spec;
    return nullptr;
  }

 private:
  OptionSpec& add(std::string name, OptionType type, OptionValue def, std::string doc) {
    if (find(name) != nullptr)
      throw std::logic_error("option '" + name + "' is declared twice");
    OptionSpec spec;
    spec.name = std::move(name);
    spec.type = type;
    spec.default_value = std::move(def);
    spec.doc = std::move(doc);
    specs_.push_back(std::move(spec));
    return specs_.back();
  }

  std::vector<OptionSpec> specs_;
};

/// Validated option values handed to a plugin factory: every declared option
/// is present (given or defaulted) with its declared type.
class Options {
 public:
  Options() = default;
  /// Builds from already-validated values (the host does this).
  explicit Options(std::map<std::string, OptionValue> values) : values_(std::move(values)) {}

  /// True if `name` has a value.
  [[nodiscard]] bool has(const std::string& name) const { return values_.count(name) != 0; }
  /// The raw value of `name`; throws std::out_of_range if absent.
  [[nodiscard]] const OptionValue& at(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw std::out_of_range("option '" + name + "' is not set");
    return it->second;
  }
  /// A boolean option.
  [[nodiscard]] bool boolean(const std::string& name) const { return get<bool>(name); }
  /// An integer option.
  [[nodiscard]] std::int64_t integer(const std::string& name) const {
    return get<std::int64_t>(name);
  }
  /// A number option.
  [[nodiscard]] double number(const std::string& name) const { return get<double>(name); }
  /// A string option.
  [[nodiscard]] const std::string& string(const std::string& name) const {
    return get<std::string>(name);
  }
  /// A list-of-integers option.
  [[nodiscard]] const std::vector<std::int64_t>& integers(const std::string& name) const {
    return get<std::vector<std::int64_t>>(name);
  }
  /// A list-of-numbers option.
  [[nodiscard]] const std::vector<double>& numbers(const std::string& name) const {
    return get<std::vector<double>>(name);
  }
  /// All values, sorted by name.
  [[nodiscard]] const std::map<std::string, OptionValue>& values() const { return values_; }

 private:
  template <typename T>
  const T& get(const std::string& name) const {
    const OptionValue& value = at(name);
    if (const T* typed = std::get_if<T>(&value)) return *typed;
    throw std::invalid_argument("option '" + name + "' holds " + describe(type_of(value)));
  }

  std::map<std::string, OptionValue> values_;
};

}  // namespace runner
