#include "format.hpp"

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

namespace runner::experiment_detail {

namespace {

OptionSpec spec_of(std::string name, OptionType type, std::optional<OptionValue> def,
                   std::string doc) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.type = type;
  spec.default_value = std::move(def);
  spec.doc = std::move(doc);
  return spec;
}

// Every numeric key has both bounds: a value that validates must also run
// (a billion repetitions or steps would exhaust memory long after validation).
HostKey integer_key(std::string name, std::int64_t def, std::int64_t min,
                    std::optional<std::int64_t> max, std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::integer, OptionValue{def}, std::move(doc)),
              apply};
  key.spec.min = static_cast<double>(min);
  if (max) key.spec.max = static_cast<double>(*max);
  return key;
}

HostKey warmup_key(std::string doc, Apply apply) {
  HostKey key = integer_key("warmup", 10, 0, kMaxSteps, std::move(doc), apply);
  key.role = KeyRole::warmup;
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

// Keys that do not change a measurement, or that change which sections are
// valid: trials differ in their canonical JSON, so these stay fixed.
HostKey fixed(HostKey key) {
  key.per_trial = false;
  return key;
}

const std::string& str(const OptionValue& v) { return std::get<std::string>(v); }
std::int64_t int_of(const OptionValue& v) { return std::get<std::int64_t>(v); }
bool bool_of(const OptionValue& v) { return std::get<bool>(v); }

}  // namespace

const std::vector<SectionSpec>& section_specs() {
  static const std::vector<SectionSpec> specs = [] {
    std::vector<SectionSpec> s;

    HostKey name = string_key("name", "", {}, "experiment name (default: the file's stem)",
                              [](Experiment& e, const OptionValue& v) { e.name = str(v); });
    name.spec.default_value.reset();  // the default depends on the file
    name.non_empty = true;
    HostKey timeout{spec_of("timeout", OptionType::number, OptionValue{3600.0},
                            "per-run time limit: \"90s\", \"30m\", \"2h\" or seconds"),
                    [](Experiment& e, const OptionValue& v) {
                      e.timeout_s = std::get<double>(v);
                    }};
    timeout.role = KeyRole::duration;
    timeout.spec.max = kMaxRunTimeoutSeconds;
    s.push_back({"experiment", std::nullopt, std::nullopt,
                 {fixed(name),
                  fixed(string_key("description", "", {}, "free text",
                                   [](Experiment& e, const OptionValue& v) {
                                     e.description = str(v);
                                   })),
                  fixed(string_key("kind", "train", {"train", "infer"}, "what the experiment runs",
                                   [](Experiment& e, const OptionValue& v) {
                                     e.kind = parse_run_kind(str(v));
                                   })),
                  integer_key("seed", 0, 0, std::nullopt, "global seed",
                              [](Experiment& e, const OptionValue& v) { e.seed = int_of(v); }),
                  fixed(integer_key("repeats", 1, 1, kMaxRepeats,
                                    "independent repetitions of every trial",
                                    [](Experiment& e, const OptionValue& v) {
                                      e.repeats = int_of(v);
                                    })),
                  fixed(timeout)}});

    s.push_back({"device", std::nullopt, std::nullopt,
                 {string_key("type", "cpu", {"cpu", "cuda", "auto"}, "where to run",
                             [](Experiment& e, const OptionValue& v) { e.device.type = str(v); }),
                  integer_key("threads", 0, 0, kMaxThreads,
                              "intra-op threads; 0 = LibTorch default",
                              [](Experiment& e, const OptionValue& v) {
                                e.device.threads = int_of(v);
                              }),
                  integer_key("interop_threads", 0, 0, kMaxThreads,
                              "inter-op threads; 0 = LibTorch default",
                              [](Experiment& e, const OptionValue& v) {
                                e.device.interop_threads = int_of(v);
                              })}});

    s.push_back({"model", PluginKind::model, std::nullopt, {}});

    s.push_back({"data", PluginKind::loader, std::nullopt,
                 {integer_key("batch_size", 32, 1, kMaxBatchSize, "samples per batch",
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

    s.push_back({"optimizer", PluginKind::optimizer, RunKind::train, {}});

    s.push_back({"train", std::nullopt, RunKind::train,
                 {integer_key("steps", 100, 1, kMaxSteps, "measured steps",
                              [](Experiment& e, const OptionValue& v) {
                                e.train.steps = int_of(v);
                              }),
                  warmup_key("warm-up steps before measurement, or \"auto\"",
                             [](Experiment& e, const OptionValue& v) {
                               e.train.warmup = int_of(v);
                             })}});

    s.push_back({"infer", std::nullopt, RunKind::infer,
                 {integer_key("batches", 100, 1, kMaxSteps, "measured batches",
                              [](Experiment& e, const OptionValue& v) {
                                e.infer.batches = int_of(v);
                              }),
                  warmup_key("warm-up batches before measurement, or \"auto\"",
                             [](Experiment& e, const OptionValue& v) {
                               e.infer.warmup = int_of(v);
                             }),
                  string_key("mode", "inference", {"inference", "no_grad"},
                             "autograd guard of the loop",
                             [](Experiment& e, const OptionValue& v) { e.infer.mode = str(v); })}});

    HostKey bucket{spec_of("bucket_mb", OptionType::number, OptionValue{25.0},
                           "gradient bucket size in MiB"),
                   [](Experiment& e, const OptionValue& v) {
                     e.distributed.bucket_mb = std::get<double>(v);
                   }};
    bucket.spec.min = 0.001;
    bucket.spec.max = 4096.0;
    HostKey collective_timeout{spec_of("timeout", OptionType::number, OptionValue{60.0},
                                       "time limit of rendezvous and of each collective: "
                                       "\"90s\", \"2m\" or seconds"),
                               [](Experiment& e, const OptionValue& v) {
                                 e.distributed.timeout_s = std::get<double>(v);
                               }};
    collective_timeout.role = KeyRole::duration;
    collective_timeout.spec.max = kMaxCollectiveTimeoutSeconds;
    s.push_back({"distributed", std::nullopt, RunKind::train,
                 {integer_key("world_size", 2, 1, kMaxWorldSize,
                              "data-parallel ranks (local processes)",
                              [](Experiment& e, const OptionValue& v) {
                                e.distributed.world_size = int_of(v);
                              }),
                  string_key("backend", "gloo", {"gloo", "nccl"},
                             "c10d backend: gloo (CPU tensors) or nccl (CUDA tensors)",
                             [](Experiment& e, const OptionValue& v) {
                               e.distributed.backend = str(v);
                             }),
                  bucket, fixed(collective_timeout)}});

    s.push_back({"comm_hook", PluginKind::comm_hook, RunKind::train, {}});

    HostKey path{spec_of("path", OptionType::string, std::nullopt,
                         "plugin libraries or folders, relative to this file")};
    path.role = KeyRole::path_list;
    path.non_empty = true;
    s.push_back({"plugins", std::nullopt, std::nullopt, {fixed(path)}});
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

std::vector<std::string> top_level_names() {
  std::vector<std::string> names = section_names();
  names.emplace_back("sweep");
  names.emplace_back("trial");
  return names;
}

std::vector<std::string> key_names(const SectionSpec& section) {
  std::vector<std::string> names;
  if (section.plugin) names.emplace_back("plugin");
  for (const auto& key : section.keys) names.push_back(key.spec.name);
  return names;
}

bool DottedKey::per_trial() const { return host == nullptr || host->per_trial; }

std::optional<DottedKey> lookup_dotted(std::string_view dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const SectionSpec* section = find_section(dotted.substr(0, dot));
  const std::string_view key = dotted.substr(dot + 1);
  if (section == nullptr || key.empty()) return std::nullopt;
  const HostKey* host = find_key(*section, key);
  if (host != nullptr) return DottedKey{section, std::string(key), host};
  // A plugin option's name is one TOML key; "model.a.b" addresses nothing.
  if (!section->plugin || key.find('.') != std::string_view::npos) return std::nullopt;
  return DottedKey{section, std::string(key), nullptr};
}

std::pair<std::string, std::string> unknown_dotted_key(std::string_view dotted,
                                                       std::string_view where) {
  std::string message = "unknown key '" + std::string(dotted) + "'";
  if (!where.empty()) message += " in " + std::string(where);
  const auto dot = dotted.find('.');
  const std::string head(dotted.substr(0, dot));
  const std::string tail = dot == std::string_view::npos ? "" : std::string(dotted.substr(dot + 1));
  const SectionSpec* section = find_section(head);
  std::optional<std::string> suggestion;
  std::string hint;
  if (section != nullptr && !tail.empty()) {
    // The section is right; the key is the typo.
    if (const auto match = closest_match(tail, key_names(*section)))
      suggestion = head + "." + *match;
    hint = "keys of [" + head + "]: " + join(key_names(*section), ", ");
  } else {
    if (const auto match = closest_match(head, section_names())) {
      const std::string fixed_key = *match + "." + tail;
      if (!tail.empty() && lookup_dotted(fixed_key)) suggestion = fixed_key;
    }
    hint = "a key is written section.key, e.g. train.steps; known sections: " +
           join(section_names(), ", ");
  }
  if (suggestion) message += "; did you mean '" + *suggestion + "'?";
  return {message, hint};
}

std::string fixed_keys_list() {
  std::vector<std::string> names;
  for (const auto& section : section_specs())
    for (const auto& key : section.keys)
      if (!key.per_trial) names.push_back(section.name + "." + key.spec.name);
  return join(names, ", ");
}

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
                              double max_seconds) const {
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
  if (seconds && std::isfinite(*seconds) && *seconds > 0 && *seconds <= max_seconds)
    return *seconds;
  fail(node, "'" + dotted + "' must be a positive duration like \"90s\", \"30m\" or \"2h\" of at most " +
                 shortest(max_seconds) + " seconds, found " + found);
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
  if (found >= spec.min_items && (!spec.max_items || found <= *spec.max_items)) return;
  auto items = [](std::size_t n) { return std::to_string(n) + (n == 1 ? " item" : " items"); };
  std::string bound;
  if (spec.max_items && *spec.max_items == spec.min_items)
    bound = "exactly " + items(spec.min_items);
  else if (spec.max_items && spec.min_items > 0)
    bound = "between " + std::to_string(spec.min_items) + " and " + items(*spec.max_items);
  else if (spec.max_items)
    bound = "at most " + items(*spec.max_items);
  else
    bound = "at least " + items(spec.min_items);
  fail(array, "'" + dotted + "' must have " + bound + ", found " + std::to_string(found), hint);
}

}  // namespace runner::experiment_detail
