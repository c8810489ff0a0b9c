// A resolved configuration written back as experiment TOML (config_toml.hpp).
#include "runner/experiment/config_toml.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "format.hpp"
#include "runner/common/json.hpp"

namespace runner {
namespace {

using nlohmann::json;
using experiment::detail::toml_quote;

std::optional<std::string> toml_value(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return std::nullopt;
    case json::value_t::string: return toml_quote(v.get<std::string>());
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      std::string text = canonical_json(v);
      if (text.find_first_of(".eE") == std::string::npos) text += ".0";
      return text;
    }
    case json::value_t::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) {
        const auto item = toml_value(v[i]);
        if (!item) return std::nullopt;
        out += (i ? ", " : "") + *item;
      }
      return out + "]";
    }
    case json::value_t::object: {
      std::string out = "{ ";
      bool first = true;
      for (const auto& [k, item] : v.items()) {
        const auto value = toml_value(item);
        if (!value) continue;
        out += (first ? "" : ", ") + toml_key(k) + " = " + *value;
        first = false;
      }
      return out + (first ? "}" : " }");
    }
    default: return canonical_json(v);
  }
}

void toml_table(std::ostringstream& out, const std::string& name, const json& table) {
  // The plugin first, then the host's keys and the plugin's options, as an
  // experiment file is written.
  std::vector<std::pair<std::string, const json*>> keys;
  if (const auto plugin = table.find("plugin"); plugin != table.end())
    keys.emplace_back("plugin", &*plugin);
  for (const auto& [k, v] : table.items()) {
    if (k == "plugin") continue;
    if (k == "options" && v.is_object()) {
      for (const auto& [ok, ov] : v.items()) keys.emplace_back(ok, &ov);
    } else {
      keys.emplace_back(k, &v);
    }
  }
  std::vector<std::pair<std::string, const json*>> subtables;
  out << "[" << name << "]\n";
  for (const auto& [k, v] : keys) {
    if (v->is_object() && !v->empty()) {
      subtables.emplace_back(k, v);
      continue;
    }
    if (const auto text = toml_value(*v)) {
      out << toml_key(k) << " = " << *text << "\n";
    } else {
      out << "# " << toml_key(k) << " = (none)\n";
    }
  }
  for (const auto& [k, v] : subtables) {
    out << "\n";
    toml_table(out, name + "." + toml_key(k), *v);
  }
}

}  // namespace

std::string toml_string(std::string_view text) { return toml_quote(text); }

std::string toml_key(const std::string& key) {
  // isalnum would take the locale's letters; TOML's bare keys are ASCII.
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
  return bare ? key : toml_quote(key);
}

std::string config_toml(const std::string& config_json) {
  const json config = parse_json(config_json);
  std::ostringstream out;
  // The configuration's top-level values (kind, seed) are the [experiment]
  // table's keys in an experiment file.
  json experiment = json::object();
  std::vector<std::pair<std::string, const json*>> tables;
  for (const auto& [k, v] : config.items()) {
    if (v.is_object()) {
      tables.emplace_back(k, &v);
    } else {
      experiment[k] = v;
    }
  }
  bool first = true;
  if (!experiment.empty()) {
    toml_table(out, "experiment", experiment);
    first = false;
  }
  for (const auto& [k, v] : tables) {
    if (!first) out << "\n";
    first = false;
    toml_table(out, toml_key(k), *v);
  }
  return out.str();
}

}  // namespace runner
