// Plugin options: every plugin declares the options it takes (name, type,
// default, one-line doc, constraints); the host validates an experiment's
// table against the declaration before the plugin is ever called.
//
// Declare each option once, bound to a field of a plain struct whose member
// initialisers are the defaults (in the spirit of LibTorch's `*Options`
// structs); the factory receives the struct, filled in and validated. This
// example is compiled verbatim by tests/sdk/options_example_test.cpp:
//
//   struct ScheduleOptions {
//     double peak_lr = 0.0;                       // required: no useful default
//     std::int64_t warmup_steps = 100;
//     std::string shape = "cosine";
//     std::array<double, 2> betas{0.9, 0.999};    // exactly two numbers
//     std::vector<std::string> no_decay{"bias", "norm"};
//   };
//
//   runner::OptionBinder<ScheduleOptions> schedule_options() {
//     runner::OptionBinder<ScheduleOptions> o;
//     o.field("peak_lr", &ScheduleOptions::peak_lr, "learning rate after warm-up")
//         .range(0.0, std::nullopt)
//         .required();
//     o.field("warmup_steps", &ScheduleOptions::warmup_steps, "steps of linear warm-up")
//         .range(0, 1000000);
//     o.field("shape", &ScheduleOptions::shape, "decay after warm-up").one_of({"cosine", "linear"});
//     o.field("betas", &ScheduleOptions::betas, "moment decay rates").range(0.0, 1.0);
//     o.field("no_decay", &ScheduleOptions::no_decay, "parameters without weight decay")
//         .items(0, 8);
//     return o;
//   }
//
// Registrar::add_optimizer (and add_model, ...) take the binder and a factory
// of `const ScheduleOptions&` (plugin.hpp). A rule over several options is
// declared with the fields, `o.check(fn)`, where fn throws OptionError; a
// model's rule that needs the data is its data check (plugin.hpp). Underneath, a binder is an
// OptionSchema (what crosses the plugin boundary) plus a reader of the
// validated `Options` map; both can also be used directly.
//
// This header does not include LibTorch: the experiment layer uses it too.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
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
enum class OptionType { boolean, integer, number, string, integer_list, number_list, string_list };

/// Name of an option type as users see it in messages ("an integer", ...).
inline const char* describe(OptionType type) {
  switch (type) {
    case OptionType::boolean: return "a boolean";
    case OptionType::integer: return "an integer";
    case OptionType::number: return "a number";
    case OptionType::string: return "a string";
    case OptionType::integer_list: return "a list of integers";
    case OptionType::number_list: return "a list of numbers";
    case OptionType::string_list: return "a list of strings";
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
    case OptionType::string_list: return "string[]";
  }
  return "?";
}

/// True for the three list types.
inline bool is_list(OptionType type) {
  return type == OptionType::integer_list || type == OptionType::number_list ||
         type == OptionType::string_list;
}

/// One option value; the alternative always matches the declared OptionType
/// (integers given for a number option are converted to double by the host).
using OptionValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                                 std::vector<double>, std::vector<std::string>>;

/// The OptionType an OptionValue holds.
inline OptionType type_of(const OptionValue& value) {
  return static_cast<OptionType>(value.index());
}

/// TOML-like rendering of a value: true, 3, 0.1, "relu", [1, 2], ["bias"].
inline std::string to_string(const OptionValue& value) {
  auto number = [](double x) {
    std::string s = std::to_string(x);
    if (std::isfinite(x) && s.find('.') != std::string::npos) {
      while (!s.empty() && s.back() == '0') s.pop_back();
      if (!s.empty() && s.back() == '.') s += '0';
    }
    return s;
  };
  auto list = [](const auto& items, const auto& render) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + render(items[i]);
    return out + "]";
  };
  auto quote = [](const std::string& s) { return "\"" + s + "\""; };
  auto integer = [](std::int64_t i) { return std::to_string(i); };
  struct Visitor {
    decltype(number)& num;
    decltype(list)& lst;
    decltype(quote)& quo;
    decltype(integer)& in;
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return in(i); }
    std::string operator()(double d) const { return num(d); }
    std::string operator()(const std::string& s) const { return quo(s); }
    std::string operator()(const std::vector<std::int64_t>& v) const { return lst(v, in); }
    std::string operator()(const std::vector<double>& v) const { return lst(v, num); }
    std::string operator()(const std::vector<std::string>& v) const { return lst(v, quo); }
  };
  return std::visit(Visitor{number, list, quote, integer}, value);
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
  std::vector<std::string> choices;        ///< allowed values of a string (or of each list item)
  std::vector<std::int64_t> integer_choices;  ///< allowed values of an integer (or of each list item)
  std::size_t min_items = 0;               ///< lists: fewest items allowed
  std::optional<std::size_t> max_items;    ///< lists: most items allowed (empty: no limit)
  /// An option added to a plugin after trials of it were recorded: a trial
  /// that leaves it at its default keeps the identity (config hash) it had.
  bool added_later = false;
  /// A string (or list of strings) naming files or folders: a relative value
  /// is resolved against the folder of the experiment file that writes it,
  /// and the plugin receives an absolute path.
  bool is_path = false;
  /// A path option naming a file whose bytes, not its path, identify the
  /// trial: the host hashes the file (SHA-256) when it validates the
  /// experiment, puts the hash in the trial's identity, records the file with
  /// each run (role "SECTION.OPTION") and fails a run whose file changed
  /// since. For the model files a plugin runs (a compiled package).
  bool by_content = false;

  /// Inclusive range for numbers, integers, and each item of a list.
  OptionSpec& range(std::optional<double> lo, std::optional<double> hi) {
    min = lo;
    max = hi;
    return *this;
  }
  /// Allowed values of a string option (or of each item of a list of strings).
  OptionSpec& one_of(std::vector<std::string> allowed) {
    choices = std::move(allowed);
    return *this;
  }
  /// Allowed values of an integer option (or of each item of a list of
  /// integers); a name of its own, since one_of({0}) would read 0 as a string.
  OptionSpec& one_of_integers(std::vector<std::int64_t> allowed) {
    integer_choices = std::move(allowed);
    return *this;
  }
  /// Lists: the fewest items allowed.
  OptionSpec& at_least(std::size_t items) {
    min_items = items;
    return *this;
  }
  /// Lists: between `fewest` and `most` items (equal: an exact length).
  OptionSpec& items(std::size_t fewest, std::size_t most) {
    min_items = fewest;
    max_items = most;
    return *this;
  }
  /// Marks an option added in a later version of the plugin: trials that
  /// leave it at its default keep their identity (see added_later).
  OptionSpec& added_later_with_default() {
    added_later = true;
    return *this;
  }
  /// Marks a string option as a file or folder (see is_path).
  OptionSpec& path() {
    is_path = true;
    return *this;
  }
  /// Marks a string option as a file identified by its bytes (see
  /// by_content); implies path().
  OptionSpec& content() {
    is_path = true;
    by_content = true;
    return *this;
  }
  /// Removes the default: the experiment must set this option.
  OptionSpec& required() {
    default_value.reset();
    return *this;
  }
};

class Options;

/// A rule over a plugin's option values taken together (width divisible by
/// heads, ...): throws runner::OptionError naming the option to change. It
/// must not need LibTorch or the data: the host calls it for every trial
/// when it validates the experiment, before any run.
using OptionCheck = std::function<void(const Options&)>;

/// The ordered set of options a plugin declares, and the checks of their combinations.
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
  /// Declares a list-of-strings option.
  OptionSpec& strings(std::string name, std::vector<std::string> def, std::string doc) {
    return add(std::move(name), OptionType::string_list, OptionValue{std::move(def)},
               std::move(doc));
  }
  /// Declares an option of `type` whose default `def` (if any) holds that type.
  OptionSpec& add(std::string name, OptionType type, std::optional<OptionValue> def,
                  std::string doc) {
    if (find(name) != nullptr)
      throw std::logic_error("option '" + name + "' is declared twice");
    if (def && type_of(*def) != type)
      throw std::logic_error("the default of option '" + name + "' is not " + describe(type));
    OptionSpec spec;
    spec.name = std::move(name);
    spec.type = type;
    spec.default_value = std::move(def);
    spec.doc = std::move(doc);
    specs_.push_back(std::move(spec));
    return specs_.back();
  }

  /// Adds a check of the options' combination (see OptionCheck).
  void add_check(OptionCheck check) { checks_.push_back(std::move(check)); }

  /// All declarations, in declaration order.
  [[nodiscard]] const std::vector<OptionSpec>& specs() const { return specs_; }
  /// The checks of the options' combinations, in declaration order.
  [[nodiscard]] const std::vector<OptionCheck>& checks() const { return checks_; }
  /// The declaration of `name`, or nullptr.
  [[nodiscard]] const OptionSpec* find(const std::string& name) const {
    for (const auto& spec : specs_)
      if (spec.name == name) return &spec;
    return nullptr;
  }

 private:
  std::vector<OptionSpec> specs_;
  std::vector<OptionCheck> checks_;
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
  /// A list-of-strings option.
  [[nodiscard]] const std::vector<std::string>& strings(const std::string& name) const {
    return get<std::vector<std::string>>(name);
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

namespace detail {

template <typename T>
inline constexpr bool kAlwaysFalse = false;

template <typename T>
struct ListTraits {
  static constexpr bool is_list = false;
};
template <typename T, typename A>
struct ListTraits<std::vector<T, A>> {
  static constexpr bool is_list = true;
  static constexpr std::optional<std::size_t> fixed_size{};
  using Item = T;
};
template <typename T, std::size_t N>
struct ListTraits<std::array<T, N>> {
  static constexpr bool is_list = true;
  static constexpr std::optional<std::size_t> fixed_size{N};
  using Item = T;
};

template <typename T, bool IsList>
struct ItemOf {
  using type = T;
};
template <typename T>
struct ItemOf<T, true> {
  using type = typename ListTraits<T>::Item;
};

// The option type of a scalar field: bool, an integer type, a floating type or std::string.
template <typename T>
constexpr OptionType scalar_type() {
  if constexpr (std::is_same_v<T, bool>) {
    return OptionType::boolean;
  } else if constexpr (std::is_integral_v<T>) {
    static_assert(sizeof(T) <= sizeof(std::int64_t), "integer options are at most 64 bits");
    return OptionType::integer;
  } else if constexpr (std::is_floating_point_v<T>) {
    return OptionType::number;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return OptionType::string;
  } else {
    static_assert(kAlwaysFalse<T>,
                  "an option field is a bool, an integer, a floating-point number, a "
                  "std::string, or a std::vector / std::array of integers, numbers or strings");
    return OptionType::boolean;
  }
}

template <typename T>
constexpr OptionType field_type() {
  if constexpr (ListTraits<T>::is_list) {
    constexpr OptionType item = scalar_type<typename ListTraits<T>::Item>();
    static_assert(item != OptionType::boolean, "a list of booleans is not an option type");
    if constexpr (item == OptionType::integer) return OptionType::integer_list;
    else if constexpr (item == OptionType::number) return OptionType::number_list;
    else return OptionType::string_list;
  } else {
    return scalar_type<T>();
  }
}

// The value type an option of a field's (item) type has in OptionValue.
template <typename T>
using Stored = std::conditional_t<
    std::is_same_v<T, bool>, bool,
    std::conditional_t<std::is_integral_v<T>, std::int64_t,
                       std::conditional_t<std::is_floating_point_v<T>, double, std::string>>>;

template <typename T>
T item_from(const Stored<T>& stored, const std::string& name) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!std::in_range<T>(stored))
      throw std::out_of_range("option '" + name + "' = " + std::to_string(stored) +
                              " does not fit its field");
    return static_cast<T>(stored);
  } else {
    return static_cast<T>(stored);
  }
}

template <typename T>
OptionValue to_value(const T& field) {
  if constexpr (ListTraits<T>::is_list) {
    using Item = typename ListTraits<T>::Item;
    std::vector<Stored<Item>> items;
    for (const auto& item : field) items.push_back(static_cast<Stored<Item>>(item));
    return OptionValue{std::move(items)};
  } else {
    return OptionValue{static_cast<Stored<T>>(field)};
  }
}

template <typename T>
T from_value(const OptionValue& value, const std::string& name) {
  if constexpr (ListTraits<T>::is_list) {
    using Item = typename ListTraits<T>::Item;
    const auto* items = std::get_if<std::vector<Stored<Item>>>(&value);
    if (items == nullptr)
      throw std::invalid_argument("option '" + name + "' holds " + describe(type_of(value)));
    T out{};
    if constexpr (ListTraits<T>::fixed_size) {
      if (items->size() != out.size())
        throw std::invalid_argument("option '" + name + "' has " +
                                    std::to_string(items->size()) + " items, expected " +
                                    std::to_string(out.size()));
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = item_from<Item>((*items)[i], name);
    } else {
      for (const auto& item : *items) out.push_back(item_from<Item>(item, name));
    }
    return out;
  } else {
    const auto* stored = std::get_if<Stored<T>>(&value);
    if (stored == nullptr)
      throw std::invalid_argument("option '" + name + "' holds " + describe(type_of(value)));
    return item_from<T>(*stored, name);
  }
}

// Constraints a field's C++ type implies: an exact length for std::array, and
// the range of an integer type narrower than 64 bits.
template <typename T>
void constrain(OptionSpec& spec) {
  using Item = typename ItemOf<T, ListTraits<T>::is_list>::type;
  if constexpr (ListTraits<T>::is_list) {
    constexpr std::optional<std::size_t> size = ListTraits<T>::fixed_size;
    if constexpr (size.has_value()) spec.items(*size, *size);
  }
  if constexpr (std::is_integral_v<Item> && !std::is_same_v<Item, bool>) {
    using Limits = std::numeric_limits<Item>;
    if constexpr (std::cmp_greater(Limits::min(), std::numeric_limits<std::int64_t>::min()))
      spec.min = static_cast<double>(Limits::min());
    if constexpr (std::cmp_less(Limits::max(), std::numeric_limits<std::int64_t>::max()))
      spec.max = static_cast<double>(Limits::max());
  }
}

}  // namespace detail

/// Thrown by an option check (OptionBinder::check), a model's data check or
/// a factory when the value of one of its options cannot work (width not
/// divisible by heads, an `impl` whose kernel the device lacks). The host
/// reports it at the option's file:line:col, before any run starts:
///   throw runner::OptionError("impl", "this device has no fused Adam kernel");
class OptionError : public std::invalid_argument {
 public:
  OptionError(std::string option, const std::string& message)
      : std::invalid_argument(message), option_(std::move(option)) {}
  /// The option's name, as declared.
  [[nodiscard]] const std::string& option() const noexcept { return option_; }

 private:
  std::string option_;
};

/// Binds options to the fields of a struct `Opts`: each option is declared
/// once (name, field, doc, constraints) and read back as a filled `Opts`.
/// Defaults are the member initialisers of a default-constructed `Opts`.
template <typename Opts>
class OptionBinder {
 public:
  /// Declares option `name` stored in `member`; its type follows the member's
  /// (bool, integer, floating, std::string, std::vector or std::array of
  /// those). A std::array has exactly its length; an integer type narrower
  /// than 64 bits is bounded by its range. Chain constraints on the result.
  template <typename T>
  OptionSpec& field(std::string name, T Opts::*member, std::string doc) {
    OptionSpec& spec = schema_.add(name, detail::field_type<T>(),
                                   detail::to_value(defaults_.*member), std::move(doc));
    detail::constrain<T>(spec);
    readers_.push_back([name = std::move(name), member](Opts& out, const Options& in) {
      if (in.has(name)) out.*member = detail::from_value<T>(in.at(name), name);
    });
    return spec;
  }

  /// Declares a check of the options' combination on the filled struct
  /// (see OptionCheck): `check` throws runner::OptionError(option, message).
  OptionBinder& check(std::function<void(const Opts&)> fn) {
    checks_.push_back(std::move(fn));
    return *this;
  }

  /// The declarations, as the host sees them, each check wrapped to read the
  /// untyped options into an Opts first (valid until the next call).
  [[nodiscard]] const OptionSchema& schema() const {
    // Wrapped on each call, so that fields declared after a check reach it.
    with_checks_ = schema_;
    for (const auto& check : checks_)
      with_checks_.add_check(
          [defaults = defaults_, readers = readers_, check](const Options& options) {
            check(read_into(defaults, readers, options));
          });
    return with_checks_;
  }

  /// The struct filled from validated options (fields without a value keep their default).
  [[nodiscard]] Opts read(const Options& options) const {
    return read_into(defaults_, readers_, options);
  }

 private:
  using Reader = std::function<void(Opts&, const Options&)>;
  static Opts read_into(const Opts& defaults, const std::vector<Reader>& readers,
                        const Options& options) {
    Opts out = defaults;
    for (const auto& reader : readers) reader(out, options);
    return out;
  }

  Opts defaults_{};
  OptionSchema schema_;
  std::vector<Reader> readers_;
  std::vector<std::function<void(const Opts&)>> checks_;
  mutable OptionSchema with_checks_;  // schema_ plus the wrapped checks
};

}  // namespace runner
