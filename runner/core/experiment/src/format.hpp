// The experiment file format, shared by the files of the experiment layer
// (internal; not installed): the table of sections and host keys, how TOML
// values are described and rendered in messages, and which file (or --set
// argument) every value came from, so that every error can say where.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/options.hpp"

namespace runner::experiment::detail {

// --- sections and host keys --------------------------------------------------------
// Every known section and host-level key lives in one table, so that a new key
// is data, not control flow. Host keys reuse OptionSpec, so they are checked by
// the same code (and give the same messages) as plugin options.

using Apply = void (*)(Experiment&, const OptionValue&);

enum class KeyRole {
  value,      // checked against spec
  path_list,  // a string or a list of strings, resolved against the writing file's folder
  duration,   // "90s", "1h30m", or a positive number of seconds
  warmup,     // a step count >= 0, or "auto" (steady-state detection)
  repeats,    // a count from 1, or "auto" (rounds that stop when the answer is known)
  path,       // one string, resolved against the writing file's folder; apply gets it absolute
  labels,     // a table of KEY = "value" (run labels, labels.hpp); read by read_labels
};

struct HostKey {
  OptionSpec spec;          // type, default, range, choices, doc
  Apply apply = nullptr;    // stores a checked value; nullptr for special keys
  bool non_empty = false;   // strings: "" is an error
  bool printable = false;   // strings: no control characters (names reach terminals)
  KeyRole role = KeyRole::value;
  bool per_trial = true;    // false: the same for every trial, so [sweep]/[[trial]] may not set it
  bool positive = false;    // numbers: must be > 0 (the range's lower bound stays open)
};

struct SectionSpec {
  std::string name;
  std::optional<PluginKind> plugin;  // the section names a plugin; its other keys are options
  std::vector<RunKind> kinds;        // the kinds the section is valid for; empty: every kind
  std::vector<HostKey> keys;
  // Any key names an environment variable whose value is a string ([env]).
  bool environment = false;
};

[[nodiscard]] const std::vector<SectionSpec>& section_specs();
[[nodiscard]] const SectionSpec* find_section(std::string_view name);
[[nodiscard]] const HostKey* find_key(const SectionSpec& section, std::string_view name);
/// Configuration sections, in documentation order.
[[nodiscard]] std::vector<std::string> section_names();
/// Every top-level table a file may have: the sections, then sweep and trial.
[[nodiscard]] std::vector<std::string> top_level_names();
/// "plugin" (for plugin sections) and the host keys of a section.
[[nodiscard]] std::vector<std::string> key_names(const SectionSpec& section);

/// What a dotted key ("train.steps", "model.hidden") addresses.
struct DottedKey {
  const SectionSpec* section = nullptr;
  std::string key;                 // the part after the section
  const HostKey* host = nullptr;   // null: "plugin" or a plugin option
  [[nodiscard]] bool per_trial() const;
};

/// The key `dotted` addresses, or nullopt when no section or host key has that
/// name. A key of a plugin section that is not a host key is accepted here: it
/// is a plugin option, checked once the plugin is known.
[[nodiscard]] std::optional<DottedKey> lookup_dotted(std::string_view dotted);
/// "unknown key 'trian.steps'; did you mean 'train.steps'?" and its hint.
[[nodiscard]] std::pair<std::string, std::string> unknown_dotted_key(std::string_view dotted,
                                                                     std::string_view where);
/// Keys that are the same for every trial, for messages.
[[nodiscard]] std::string fixed_keys_list();

// --- values in messages ------------------------------------------------------------

/// Shortest text that reads back as the same double.
[[nodiscard]] std::string shortest(double x);
/// "a string", "an integer", ... for what was found.
[[nodiscard]] const char* describe(const toml::node& node);
/// A value as TOML would write it, on one line: 3, 0.1, "relu", [128, 128], true.
[[nodiscard]] std::string render(const toml::node& node);
/// "a", "b" -> "\"a\", \"b\"".
[[nodiscard]] std::string quoted_list(const std::vector<std::string>& items);
/// A TOML basic string literal.
[[nodiscard]] std::string toml_quote(std::string_view text);
/// Seconds in "90s", "30m", "2h", "1h30m", "500ms", "1.5h"; nullopt if not of that form.
[[nodiscard]] std::optional<double> parse_duration(std::string_view text);

// --- where values come from ----------------------------------------------------------

/// A file (or --set argument) that values were read from.
struct Origin {
  std::string shown;             // the path as messages show it, or "--set key=value"
  bool command_line = false;     // a --set value: no line and column
  std::string chain;             // " (extended by exp.toml)" for a file read through extends
  std::filesystem::path folder;  // relative [plugins] paths resolve against it
};

/// Origins by the source-path pointer toml++ shares among all nodes of one
/// parse: nodes know their parse, and each parse is one file or one --set.
class Origins {
 public:
  const Origin& add(const toml::source_path_ptr& source, Origin origin);
  [[nodiscard]] const Origin* find(const toml::node& node) const;

 private:
  std::map<const void*, Origin> by_source_;
};

/// `key = value` as written. `key_src` is null for a --set value, which has no
/// key in any file. `key` is dotted ("train.steps") in [sweep], [[trial]] and
/// --set, and plain ("steps") inside a section.
struct Leaf {
  std::string key;
  const toml::key* key_src = nullptr;
  const toml::node* node = nullptr;
};

/// Where a `key = value` starts: `[model]` begins at '[' (the node) but
/// `model = {` at the key, so the earlier of the two is what a reader looks at.
[[nodiscard]] toml::source_position start_of(const toml::key* key, const toml::node& node);
[[nodiscard]] bool before(const toml::source_position& a, const toml::source_position& b);

/// Reads TOML values against OptionSpecs and makes every error: the location is
/// the value's own file (or --set argument), and a value from a base file names
/// the extends chain after the message.
class Checker {
 public:
  Checker(std::string root, const Origins* origins) : root_(std::move(root)), origins_(origins) {}

  [[nodiscard]] SourceLocation at(const toml::key* key, const toml::node& node) const;
  [[nodiscard]] SourceLocation at(const toml::node& node) const { return at(nullptr, node); }
  [[nodiscard]] SourceLocation at(const Leaf& leaf) const { return at(leaf.key_src, *leaf.node); }
  [[nodiscard]] SourceLocation nowhere() const { return SourceLocation{root_, 0, 0}; }
  [[nodiscard]] const Origin* origin_of(const toml::node& node) const;

  /// An error at `node` (or at the start of `key = node`), extends chain appended.
  [[nodiscard]] Error error(const toml::key* key, const toml::node& node,
                            const std::string& message, const std::string& hint = {}) const;
  [[nodiscard]] Error error(const toml::node& node, const std::string& message,
                            const std::string& hint = {}) const {
    return error(nullptr, node, message, hint);
  }
  [[nodiscard]] Error error(const Leaf& leaf, const std::string& message,
                            const std::string& hint = {}) const {
    return error(leaf.key_src, *leaf.node, message, hint);
  }
  [[noreturn]] void fail(const toml::node& node, const std::string& message,
                         const std::string& hint = {}) const {
    throw error(node, message, hint);
  }

  /// The value of `node` for `spec`, or an Error naming `dotted` (e.g. "train.steps").
  [[nodiscard]] OptionValue read(const OptionSpec& spec, const toml::node& node,
                                 const std::string& dotted, const std::string& hint) const;
  /// A duration in seconds, from `min_seconds` to `max_seconds`.
  [[nodiscard]] double read_duration(const toml::node& node, const std::string& dotted,
                                     double min_seconds, double max_seconds) const;
  /// A warm-up: an integer >= 0, or the string "auto" (returned as -1).
  [[nodiscard]] std::int64_t read_warmup(const toml::node& node, const std::string& dotted) const;
  /// [experiment] repeats: 1..kMaxRepeats, or "auto" as -1.
  [[nodiscard]] std::int64_t read_repeats(const toml::node& node, const std::string& dotted) const;

 private:
  double read_number(const OptionSpec& spec, const toml::node& node, const std::string& dotted,
                     const std::string& hint) const;
  void check_range(const OptionSpec& spec, double x, const std::string& found,
                   const toml::node& node, const std::string& dotted,
                   const std::string& hint) const;
  void check_items(const OptionSpec& spec, const toml::array& array, const std::string& dotted,
                   const std::string& hint) const;
  void check_integer_choice(const OptionSpec& spec, std::int64_t value, const toml::node& node,
                            const std::string& dotted, const std::string& hint) const;

  std::string root_;
  const Origins* origins_;
};

}  // namespace runner::experiment::detail
