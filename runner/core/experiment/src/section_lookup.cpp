// Look-ups into the table of sections and host keys (sections.cpp): by
// name, by dotted key, by plugin kind, and the "did you mean" of an unknown
// key, for the loader, its messages and the engine's.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format.hpp"
#include "runner/common/strings.hpp"

namespace runner {

namespace experiment::detail {

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
  names.emplace_back("expect");
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
  // Any name in [env] (checked when the section is read).
  if (section->environment) return DottedKey{section, std::string(key), nullptr};
  // A plugin option's name is one TOML key; "model.a.b" addresses nothing.
  if (!section->plugin || key.find('.') != std::string_view::npos) return std::nullopt;
  return DottedKey{section, std::string(key), nullptr};
}

std::pair<std::string, std::string> unknown_dotted_key(std::string_view dotted,
                                                       std::string_view where) {
  std::string message = "unknown key '" + terminal_safe(dotted) + "'";
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

}  // namespace experiment::detail

const std::string& section_of(PluginKind kind) {
  for (const auto& section : experiment::detail::section_specs())
    if (section.plugin == kind) return section.name;
  throw std::logic_error("no experiment section configures this plugin kind");
}

}  // namespace runner
