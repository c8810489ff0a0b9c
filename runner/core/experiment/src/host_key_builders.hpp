// How the table of sections (sections.cpp) declares a host key: its type,
// default, bounds and role, and how its apply function reads the checked
// value. Private to that table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "format.hpp"

namespace runner::experiment::detail::host_key_builders {

inline OptionSpec spec_of(std::string name, OptionType type, std::optional<OptionValue> def,
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
inline HostKey integer_key(std::string name, std::int64_t def, std::int64_t min,
                    std::optional<std::int64_t> max, std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::integer, OptionValue{def}, std::move(doc)),
              apply};
  key.spec.min = static_cast<double>(min);
  if (max) key.spec.max = static_cast<double>(*max);
  return key;
}

inline HostKey warmup_key(std::string doc, Apply apply) {
  HostKey key = integer_key("warmup", 10, 0, kMaxSteps, std::move(doc), apply);
  key.role = KeyRole::warmup;
  return key;
}

inline HostKey string_key(std::string name, std::string def, std::vector<std::string> choices,
                   std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::string, OptionValue{std::move(def)},
                      std::move(doc)),
              apply};
  key.spec.choices = std::move(choices);
  return key;
}

inline HostKey boolean_key(std::string name, bool def, std::string doc, Apply apply) {
  return HostKey{spec_of(std::move(name), OptionType::boolean, OptionValue{def}, std::move(doc)),
                 apply};
}

// A setting without a default: absent leaves LibTorch's own default alone.
inline HostKey optional_boolean_key(std::string name, std::string doc, Apply apply) {
  return HostKey{spec_of(std::move(name), OptionType::boolean, std::nullopt, std::move(doc)),
                 apply};
}

inline HostKey number_key(std::string name, std::optional<double> def, std::optional<double> min,
                   std::optional<double> max, std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::number,
                      def ? std::optional<OptionValue>(OptionValue{*def}) : std::nullopt,
                      std::move(doc)),
              apply};
  key.spec.min = min;
  key.spec.max = max;
  return key;
}

// A number that must be > 0 (0 itself is refused, with its own message).
inline HostKey positive_key(HostKey key) {
  key.positive = true;
  return key;
}

// A setting without a default: absent, the key is not applied at all (its
// field keeps what another key or LibTorch gives it).
inline HostKey without_default(HostKey key) {
  key.spec.default_value.reset();
  return key;
}

// Keys that do not change a measurement, or that change which sections are
// valid: trials differ in their canonical JSON, so these stay fixed.
inline HostKey fixed(HostKey key) {
  key.per_trial = false;
  return key;
}

inline const std::string& str(const OptionValue& v) { return std::get<std::string>(v); }
inline std::int64_t int_of(const OptionValue& v) { return std::get<std::int64_t>(v); }
inline bool bool_of(const OptionValue& v) { return std::get<bool>(v); }
inline double num(const OptionValue& v) { return std::get<double>(v); }
inline const std::vector<std::int64_t>& ints(const OptionValue& v) {
  return std::get<std::vector<std::int64_t>>(v);
}
inline const std::vector<double>& numbers(const OptionValue& v) { return std::get<std::vector<double>>(v); }

// An image size without a default: [n] or [height, width], each in [1, kMaxImageSide].
inline HostKey size_key(std::string name, std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::integer_list, std::nullopt, std::move(doc)),
              apply};
  key.spec.min = 1;
  key.spec.max = static_cast<double>(kMaxImageSide);
  key.spec.items(1, 2);
  return key;
}

// Per-channel values without a default (normalisation).
inline HostKey channels_key(std::string name, std::string doc, Apply apply) {
  HostKey key{spec_of(std::move(name), OptionType::number_list, std::nullopt, std::move(doc)),
              apply};
  key.spec.items(1, kMaxChannels);
  return key;
}

}  // namespace runner::experiment::detail::host_key_builders
