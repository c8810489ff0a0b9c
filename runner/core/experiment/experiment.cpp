#include "runner/core/experiment/experiment.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "runner/core/common/json.hpp"
#include "runner/core/common/sha256.hpp"
#include "runner/core/common/strings.hpp"

namespace runner {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------
// The file format: every known section and host-level key lives in this one
// table, so that later additions ([sweep], `extends`, `--set`) extend data,
// not control flow. Host keys reuse OptionSpec, so they are checked by the
// same code (and give the same messages) as plugin options.

using Apply = void (*)(Experiment&, const OptionValue&);

struct HostKey {
  OptionSpec spec;          // type, default, range, choices, doc
  Apply apply = nullptr;    // stores a checked value; nullptr for special keys
  bool non_empty = false;   // strings: "" is an error
  bool path_list = false;   // a string or a list of strings, resolved against the file's folder
};

struct SectionSpec {
  std::string name;
  std::optional<PluginKind> plugin;  // the section names a plugin; its other keys are options
  std::string only_kind;             // non-empty: the section is valid only for this kind
  std::vector<HostKey> keys;
};

OptionSpec spec_of(std::string name, OptionType type, std::optional<OptionValue> def,
                   std::string doc) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.type = type;
  spec.default_value = std::move(def);
  spec.doc = std::move(doc);
  return spec;
}

HostKey integer_key(std::string name, std::int64_t def, std::int64_t min, std::string doc,
                    Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::integer, OptionValue{def}, std::move(doc)),
              apply};
  key.spec.min = static_cast<double>(min);
  return key;
}

HostKey string_key(std::string name, std::string def, std::vector<std::string> choices,
                   std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::string, OptionValue{std::move(def)},
                      std::move(doc)),
              apply};
  key.spec.choices = std::move(choices);
  return key;
}

HostKey boolean_key(std::string name, bool def, std::string doc, Apply apply) {
  return HostKey{spec_of(std::move(name), OptionType::boolean, OptionValue{def}, std::move(doc)),
                 apply};
}

const std::string& str(const OptionValue& v) { return std::get<std::string>(v); }
std::int64_t int_of(const OptionValue& v) { return std::get<std::int64_t>(v); }
bool bool_of(const OptionValue& v) { return std::get<bool>(v); }

const std::vector<SectionSpec>& section_specs() {
  static const std::vector<SectionSpec> specs = [] {
    std::vector<SectionSpec> s;

    HostKey name = string_key("name", "", {}, "experiment name (default: the file's stem)",
                              [](Experiment& e, const OptionValue& v) { e.name = str(v); });
    name.spec.default_value.reset();  // the default depends on the file
    name.non_empty = true;
    s.push_back({"experiment", std::nullopt, "",
                 {name,
                  string_key("description", "", {}, "free text",
                             [](Experiment& e, const OptionValue& v) { e.description = str(v); }),
                  string_key("kind", "train", {"train", "infer"}, "what the experiment runs",
                             [](Experiment& e, const OptionValue& v) { e.kind = str(v); }),
                  integer_key("seed", 0, 0, "global seed",
                              [](Experiment& e, const OptionValue& v) { e.seed = int_of(v); }),
                  integer_key("repeats", 1, 1, "independent repetitions of the run",
                              [](Experiment& e, const OptionValue& v) {
                                e.repeats = int_of(v);
                              })}});

    s.push_back({"device", std::nullopt, "",
                 {string_key("type", "cpu", {"cpu", "cuda", "auto"}, "where to run",
                             [](Experiment& e, const OptionValue& v) { e.device.type = str(v); }),
                  integer_key("threads", 0, 0, "intra-op threads; 0 = LibTorch default",
                              [](Experiment& e, const OptionValue& v) {
                                e.device.threads = int_of(v);
                              }),
                  integer_key("interop_threads", 0, 0, "inter-op threads; 0 = LibTorch default",
                              [](Experiment& e, const OptionValue& v) {
                                e.device.interop_threads = int_of(v);
                              })}});

    s.push_back({"model", PluginKind::model, "", {}});

    s.push_back({"data", PluginKind::loader, "",
                 {integer_key("batch_size", 32, 1, "samples per batch",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.batch_size = int_of(v);
                              }),
                  boolean_key("shuffle", true, "seeded shuffle of the sample order each epoch",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.shuffle = bool_of(v);
                              }),
                  boolean_key("drop_last", true, "drop a final partial batch",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.drop_last = bool_of(v);
                              })}});

    s.push_back({"optimizer", PluginKind::optimizer, "train", {}});

    s.push_back({"train", std::nullopt, "train",
                 {integer_key("steps", 100, 1, "measured steps",
                              [](Experiment& e, const OptionValue& v) {
                                e.train.steps = int_of(v);
                              }),
                  integer_key("warmup", 10, 0, "warm-up steps before measurement",
                              [](Experiment& e, const OptionValue& v) {
                                e.train.warmup = int_of(v);
                              })}});

    s.push_back({"infer", std::nullopt, "infer",
                 {integer_key("batches", 100, 1, "measured batches",
                              [](Experiment& e, const OptionValue& v) {
                                e.infer.batches = int_of(v);
                              }),
                  integer_key("warmup", 10, 0, "warm-up batches before measurement",
                              [](Experiment& e, const OptionValue& v) {
                                e.infer.warmup = int_of(v);
                              }),
                  string_key("mode", "inference", {"inference", "no_grad"},
                             "autograd guard of the loop",
                             [](Experiment& e, const OptionValue& v) { e.infer.mode = str(v); })}});

    HostKey path{spec_of("path", OptionType::string, std::nullopt,
                         "plugin libraries or folders, relative to this file")};
    path.path_list = true;
    path.non_empty = true;
    s.push_back({"plugins", std::nullopt, "", {path}});
    return s;
  }();
  return specs;
}

const SectionSpec* find_section(std::string_view name) {
  for (const auto& section : section_specs())
    if (section.name == name) return &section;
  return nullptr;
}

const HostKey* find_key(const SectionSpec& section, std::string_view name) {
  for (const auto& key : section.keys)
    if (key.spec.name == name) return &key;
  return nullptr;
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& section : section_specs()) names.push_back(section.name);
  return names;
}

std::vector<std::string> key_names(const SectionSpec& section) {
  std::vector<std::string> names;
  if (section.plugin) names.emplace_back("plugin");
  for (const auto& key : section.keys) names.push_back(key.spec.name);
  return names;
}

// ---------------------------------------------------------------------------
// Formatting for messages and canonical JSON.

// Shortest text that reads back as the same double.
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

std::string quoted_list(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const auto& item : items) quoted.push_back(json_quote(item));
  return join(quoted, ", ");
}

std::string json_number(double x) {
  std::string text = shortest(x);
  // "1" would read back as an integer; keep floats floats.
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string json_number(std::int64_t x) { return std::to_string(x); }

template <typename T>
std::string json_array(const std::vector<T>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += json_number(items[i]);
  }
  return out + "]";
}

std::string json_value(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return json_number(i); }
    std::string operator()(double d) const { return json_number(d); }
    std::string operator()(const std::string& s) const { return json_quote(s); }
    std::string operator()(const std::vector<std::int64_t>& v) const { return json_array(v); }
    std::string operator()(const std::vector<double>& v) const { return json_array(v); }
  };
  return std::visit(Visitor{}, value);
}

// A JSON object whose members are already-serialised JSON values; std::map
// keeps the keys sorted bytewise, which is what makes the output canonical.
class JsonObject {
 public:
  JsonObject& add(const std::string& key, std::string json) {
    members_[key] = std::move(json);
    return *this;
  }
  [[nodiscard]] std::string str() const {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, json] : members_) {
      if (!first) out += ',';
      first = false;
      out += json_quote(key);
      out += ':';
      out += json;
    }
    return out + "}";
  }

 private:
  std::map<std::string, std::string> members_;
};

JsonObject json_of(const PluginChoice& choice) {
  JsonObject options;
  for (const auto& [name, value] : choice.options.values()) options.add(name, json_value(value));
  JsonObject out;
  out.add("plugin", json_quote(choice.plugin)).add("options", options.str());
  return out;
}

// ---------------------------------------------------------------------------
// Reading TOML values against an OptionSpec.

struct Entry {
  const toml::key* key;
  const toml::node* node;
};

bool before(const toml::source_position& a, const toml::source_position& b) {
  return a.line != b.line ? a.line < b.line : a.column < b.column;
}

// Where an entry starts: `[model]` begins at '[' (the node) but `model = {`
// at the key, so the earlier of the two is what a reader looks at.
toml::source_position start_of(const Entry& entry) {
  const auto& k = entry.key->source().begin;
  const auto& n = entry.node->source().begin;
  if (k.line == 0) return n;
  if (n.line == 0) return k;
  return before(n, k) ? n : k;
}

// toml::table is ordered by key; report problems in the order of the file.
std::vector<Entry> entries_in_file_order(const toml::table& table) {
  std::vector<Entry> entries;
  for (const auto& [key, node] : table) entries.push_back({&key, &node});
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return before(start_of(a), start_of(b));
  });
  return entries;
}

class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  [[nodiscard]] SourceLocation at(const toml::source_position& pos) const {
    return SourceLocation{file_, static_cast<int>(pos.line), static_cast<int>(pos.column)};
  }
  [[nodiscard]] SourceLocation at(const toml::node& node) const {
    return at(node.source().begin);
  }
  [[nodiscard]] SourceLocation at(const Entry& entry) const { return at(start_of(entry)); }
  [[nodiscard]] SourceLocation nowhere() const { return SourceLocation{file_, 0, 0}; }

  // The value of `node` for `spec`, or an Error naming `dotted` (e.g. "train.steps").
  [[nodiscard]] OptionValue read(const OptionSpec& spec, const toml::node& node,
                                 const std::string& dotted, const std::string& hint) const {
    switch (spec.type) {
      case OptionType::boolean:
        if (const auto* b = node.as_boolean()) return b->get();
        break;
      case OptionType::integer:
        if (const auto* i = node.as_integer()) {
          check_range(spec, static_cast<double>(i->get()), std::to_string(i->get()), node,
                      dotted, hint);
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
            check_range(spec, static_cast<double>(integer->get()),
                        std::to_string(integer->get()), item, name, hint);
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
    }
    fail(node, "'" + dotted + "' must be " + runner::describe(spec.type) + ", found " +
                   describe(node), hint);
  }

  [[noreturn]] void fail(const toml::node& node, const std::string& message,
                         const std::string& hint = {}) const {
    throw Error(at(node), message, hint);
  }

 private:
  // Integers are accepted where a number is expected: `lr = 1` is a number.
  double read_number(const OptionSpec& spec, const toml::node& node, const std::string& dotted,
                     const std::string& hint) const {
    const double x = node.is_integer() ? static_cast<double>(node.as_integer()->get())
                                       : node.as_floating_point()->get();
    // nan and inf have no JSON form and make every range check vacuous.
    if (!std::isfinite(x))
      fail(node, "'" + dotted + "' must be a finite number, found " +
                     (std::isnan(x) ? std::string("nan") : shortest(x)), hint);
    check_range(spec, x, shortest(x), node, dotted, hint);
    return x;
  }

  void check_range(const OptionSpec& spec, double x, const std::string& found,
                   const toml::node& node, const std::string& dotted,
                   const std::string& hint) const {
    const bool low = spec.min && x < *spec.min;
    const bool high = spec.max && x > *spec.max;
    if (!low && !high) return;
    std::string bound;
    if (spec.min && spec.max)
      bound = "between " + shortest(*spec.min) + " and " + shortest(*spec.max);
    else if (spec.min)
      bound = ">= " + shortest(*spec.min);
    else
      bound = "<= " + shortest(*spec.max);
    fail(node, "'" + dotted + "' must be " + bound + ", found " + found, hint);
  }

  void check_items(const OptionSpec& spec, const toml::array& array, const std::string& dotted,
                   const std::string& hint) const {
    if (array.size() >= spec.min_items) return;
    fail(array, "'" + dotted + "' must have at least " + std::to_string(spec.min_items) +
                    (spec.min_items == 1 ? " item" : " items") + ", found " +
                    std::to_string(array.size()), hint);
  }

  std::string file_;
};

std::string read_text(const fs::path& path) {
  const std::string shown = path.string();
  auto cannot_open = [&](int error) {
    return Error("cannot open experiment file '" + shown + "': " + std::strerror(error),
                 "check the path; experiments/ holds ready-to-run examples");
  };
  std::error_code ec;
  // An ifstream opens a folder without complaint and then reads nothing.
  if (fs::is_directory(path, ec)) throw cannot_open(EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw cannot_open(errno != 0 ? errno : ENOENT);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw cannot_open(errno != 0 ? errno : EIO);
  return text.str();
}

std::string describe_hint(const std::string& plugin) {
  return "run 'runner plugins describe " + plugin + "' to see its options";
}

}  // namespace

// ---------------------------------------------------------------------------

/// Phase-1 result: host-level settings checked, plugin tables kept raw inside
/// the owned TOML tree. Not copyable: it points into its own tree.
class ParsedExperiment {
 public:
  explicit ParsedExperiment(const fs::path& path);
  ParsedExperiment(const ParsedExperiment&) = delete;
  ParsedExperiment& operator=(const ParsedExperiment&) = delete;

  [[nodiscard]] const std::vector<fs::path>& plugin_paths() const { return plugin_paths_; }
  [[nodiscard]] Experiment resolve(const PluginCatalog& catalog) const;

 private:
  // A plugin section whose options wait for the catalog.
  struct PendingPlugin {
    const SectionSpec* section = nullptr;
    const toml::table* table = nullptr;
    SourceLocation section_where;
    std::string name;
    SourceLocation name_where;
  };

  void check_sections(const std::vector<Entry>& entries);
  void read_host_keys(const SectionSpec& section, const Entry& entry);
  void read_path_list(const toml::node& node, const std::string& dotted);
  void check_required_sections();
  [[nodiscard]] PluginChoice resolve_plugin(const PendingPlugin& pending,
                                            const PluginCatalog& catalog) const;

  Checker check_;
  fs::path folder_;
  toml::table root_;
  Experiment base_;  // everything but plugin options
  std::optional<PendingPlugin> model_, data_, optimizer_;
  std::vector<fs::path> plugin_paths_;
};

ParsedExperiment::ParsedExperiment(const fs::path& path)
    : check_(path.string()), folder_(path.parent_path()) {
  base_.source_path = path;
  base_.source_text = read_text(path);
  base_.name = path.stem().string();
  // The table, not the struct initialisers, is the one source of defaults.
  for (const auto& section : section_specs())
    for (const auto& key : section.keys)
      if (key.apply != nullptr && key.spec.default_value)
        key.apply(base_, *key.spec.default_value);
  try {
    root_ = toml::parse(std::string_view(base_.source_text), std::string_view(path.string()));
  } catch (const toml::parse_error& e) {
    throw Error(check_.at(e.source().begin), "invalid TOML: " + std::string(e.description()));
  }
  const std::vector<Entry> entries = entries_in_file_order(root_);
  check_sections(entries);

  // [experiment] first: its kind decides which other sections are allowed.
  for (const auto& entry : entries)
    if (entry.key->str() == "experiment") read_host_keys(*find_section("experiment"), entry);
  for (const auto& entry : entries) {
    const SectionSpec& section = *find_section(entry.key->str());
    if (!section.only_kind.empty() && section.only_kind != base_.kind)
      throw Error(check_.at(entry),
                  "section [" + section.name + "] is only used by " + section.only_kind +
                      " experiments",
                  "this experiment has kind = \"" + base_.kind + "\"; remove [" + section.name +
                      "] or set kind = \"" + section.only_kind + "\" in [experiment]");
  }
  for (const auto& entry : entries)
    if (entry.key->str() != "experiment") read_host_keys(*find_section(entry.key->str()), entry);
  check_required_sections();
  base_.plugin_paths = plugin_paths_;
}

void ParsedExperiment::check_sections(const std::vector<Entry>& entries) {
  const std::string known = "known sections: " + join(section_names(), ", ");
  for (const auto& entry : entries) {
    const std::string name(entry.key->str());
    const bool is_table = entry.node->is_table();
    if (find_section(name) != nullptr) {
      if (!is_table)
        check_.fail(*entry.node, "'" + name + "' must be a table, found " + describe(*entry.node),
                    "write it as a section: [" + name + "]");
      continue;
    }
    if (!is_table)
      throw Error(check_.at(entry), "key '" + name + "' is outside any section",
                  "put it under one of the sections; " + known);
    std::string message = "unknown section [" + name + "]";
    if (const auto match = closest_match(name, section_names()))
      message += "; did you mean [" + *match + "]?";
    throw Error(check_.at(entry), message, known);
  }
}

void ParsedExperiment::read_host_keys(const SectionSpec& section, const Entry& entry) {
  const toml::table& table = *entry.node->as_table();
  const SourceLocation where = check_.at(entry);
  PendingPlugin pending{&section, &table, where, {}, {}};
  for (const auto& item : entries_in_file_order(table)) {
    const std::string key(item.key->str());
    const std::string dotted = section.name + "." + key;
    if (section.plugin && key == "plugin") {
      const auto* name = item.node->as_string();
      if (name == nullptr)
        check_.fail(*item.node, "'" + dotted + "' must be a string, found " + describe(*item.node));
      if (name->get().empty()) check_.fail(*item.node, "'" + dotted + "' must not be empty");
      pending.name = name->get();
      pending.name_where = check_.at(*item.node);
      continue;
    }
    const HostKey* host = find_key(section, key);
    if (host == nullptr) {
      if (section.plugin) continue;  // a plugin option, checked in phase 2
      std::string message = "unknown key '" + key + "' in [" + section.name + "]";
      if (const auto match = closest_match(key, key_names(section)))
        message += "; did you mean '" + *match + "'?";
      throw Error(check_.at(item), message,
                  "keys of [" + section.name + "]: " + join(key_names(section), ", "));
    }
    if (host->path_list) {
      read_path_list(*item.node, dotted);
      continue;
    }
    const OptionValue value = check_.read(host->spec, *item.node, dotted, {});
    if (host->non_empty && std::get<std::string>(value).empty())
      check_.fail(*item.node, "'" + dotted + "' must not be empty");
    host->apply(base_, value);
  }
  if (!section.plugin) return;
  if (pending.name.empty())
    throw Error(where, "missing required key 'plugin' in [" + section.name + "]",
                "name the " + std::string(to_string(*section.plugin)) +
                    " plugin, e.g. plugin = \"...\"; run 'runner plugins' to see what is loaded");
  switch (*section.plugin) {
    case PluginKind::model: model_ = pending; break;
    case PluginKind::loader: data_ = pending; break;
    case PluginKind::optimizer: optimizer_ = pending; break;
    case PluginKind::kernel:
    case PluginKind::comm_hook: break;  // no section names these kinds yet
  }
}

void ParsedExperiment::read_path_list(const toml::node& node, const std::string& dotted) {
  auto add = [&](const toml::node& item, const std::string& name) {
    const auto* text = item.as_string();
    if (text == nullptr)
      check_.fail(item, "'" + name + "' must be a string, found " + describe(item));
    if (text->get().empty()) check_.fail(item, "'" + name + "' must not be empty");
    fs::path p(text->get());
    // Relative to the experiment file, so an experiment and its plugins move together.
    if (p.is_relative()) p = folder_ / p;
    plugin_paths_.push_back(fs::absolute(p).lexically_normal());
  };
  if (node.is_string()) {
    add(node, dotted);
    return;
  }
  const auto* array = node.as_array();
  if (array == nullptr)
    check_.fail(node, "'" + dotted + "' must be a string or a list of strings, found " +
                          describe(node));
  for (std::size_t i = 0; i < array->size(); ++i)
    add(*array->get(i), dotted + "[" + std::to_string(i) + "]");
}

void ParsedExperiment::check_required_sections() {
  if (!model_)
    throw Error(check_.nowhere(), "missing section [model]",
                "every experiment names its model: [model] plugin = \"...\"; "
                "run 'runner plugins' to see what is loaded");
  if (base_.kind != "train") return;
  if (!data_)
    throw Error(check_.nowhere(), "train experiments need a [data] section",
                "add [data] with a loader plugin (e.g. plugin = \"synthetic\"), "
                "or set kind = \"infer\" in [experiment]");
  if (!optimizer_)
    throw Error(check_.nowhere(), "train experiments need an [optimizer] section",
                "add [optimizer] with an optimizer plugin (e.g. plugin = \"sgd\"), "
                "or set kind = \"infer\" in [experiment]");
}

PluginChoice ParsedExperiment::resolve_plugin(const PendingPlugin& pending,
                                              const PluginCatalog& catalog) const {
  const SectionSpec& section = *pending.section;
  const PluginKind kind = *section.plugin;
  const std::string kind_name = to_string(kind);

  const PluginDescriptor* plugin = catalog.find(kind, pending.name);
  if (plugin == nullptr) {
    const std::vector<std::string> available = catalog.names(kind);
    std::string message = "unknown " + kind_name + " plugin '" + pending.name + "'";
    if (const auto match = closest_match(pending.name, available))
      message += "; did you mean '" + *match + "'?";
    const std::string hint =
        available.empty()
            ? "no " + kind_name +
                  " plugins are loaded; point RUNNER_PLUGIN_PATH, [plugins] path or "
                  "--plugin-path at the folder that holds them"
            : "available " + kind_name + " plugins: " + join(available, ", ") +
                  "; run 'runner plugins' to see what is loaded";
    throw Error(pending.name_where, message, hint);
  }

  std::string hint = describe_hint(plugin->name);
  std::vector<std::string> host_keys;
  for (const auto& key : section.keys) host_keys.push_back(key.spec.name);
  if (!host_keys.empty())
    hint += "; [" + section.name + "] also takes " + join(host_keys, ", ");

  std::vector<std::string> candidates;
  for (const auto& spec : plugin->schema.specs()) candidates.push_back(spec.name);
  for (const auto& key : section.keys) candidates.push_back(key.spec.name);

  std::map<std::string, OptionValue> values;
  for (const auto& item : entries_in_file_order(*pending.table)) {
    const std::string key(item.key->str());
    if (key == "plugin" || find_key(section, key) != nullptr) continue;
    const OptionSpec* spec = plugin->schema.find(key);
    if (spec == nullptr) {
      std::string message =
          "unknown option '" + key + "' for " + kind_name + " plugin '" + plugin->name + "'";
      if (const auto match = closest_match(key, candidates))
        message += "; did you mean '" + *match + "'?";
      throw Error(check_.at(item), message, hint);
    }
    values[key] = check_.read(*spec, *item.node, section.name + "." + key, hint);
  }
  for (const auto& spec : plugin->schema.specs()) {
    if (values.count(spec.name) != 0) continue;
    if (!spec.default_value)
      throw Error(pending.section_where,
                  "missing required option '" + spec.name + "' for " + kind_name + " plugin '" +
                      plugin->name + "'",
                  hint);
    values[spec.name] = *spec.default_value;
  }
  return PluginChoice{plugin->name, Options(std::move(values)), pending.name_where};
}

Experiment ParsedExperiment::resolve(const PluginCatalog& catalog) const {
  Experiment experiment = base_;
  experiment.model = resolve_plugin(*model_, catalog);
  if (data_) experiment.data = resolve_plugin(*data_, catalog);
  if (optimizer_) experiment.optimizer = resolve_plugin(*optimizer_, catalog);
  return experiment;
}

// ---------------------------------------------------------------------------

std::string Experiment::resolved_json() const {
  JsonObject root;
  root.add("kind", json_quote(kind));
  root.add("seed", std::to_string(seed));
  root.add("device", JsonObject()
                         .add("type", json_quote(device.type))
                         .add("threads", std::to_string(device.threads))
                         .add("interop_threads", std::to_string(device.interop_threads))
                         .str());
  root.add("model", json_of(model).str());
  if (data) {
    JsonObject section = json_of(*data);
    section.add("batch_size", std::to_string(data_settings.batch_size));
    section.add("shuffle", data_settings.shuffle ? "true" : "false");
    section.add("drop_last", data_settings.drop_last ? "true" : "false");
    root.add("data", section.str());
  }
  if (optimizer) root.add("optimizer", json_of(*optimizer).str());
  if (kind == "train")
    root.add("train", JsonObject()
                          .add("steps", std::to_string(train.steps))
                          .add("warmup", std::to_string(train.warmup))
                          .str());
  else if (kind == "infer")
    root.add("infer", JsonObject()
                          .add("batches", std::to_string(infer.batches))
                          .add("warmup", std::to_string(infer.warmup))
                          .add("mode", json_quote(infer.mode))
                          .str());
  return root.str();
}

std::string Experiment::config_hash() const { return sha256_hex(resolved_json()); }

std::shared_ptr<const ParsedExperiment> parse_experiment_file(const fs::path& path) {
  return std::make_shared<const ParsedExperiment>(path);
}

std::vector<fs::path> plugin_paths_of(const ParsedExperiment& parsed) {
  return parsed.plugin_paths();
}

Experiment resolve_experiment(const ParsedExperiment& parsed, const PluginCatalog& catalog) {
  return parsed.resolve(catalog);
}

Experiment load_experiment(const fs::path& path, const PluginCatalog& catalog) {
  return resolve_experiment(*parse_experiment_file(path), catalog);
}

}  // namespace runner
