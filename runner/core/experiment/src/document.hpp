// An experiment as written (internal): the root file and the files it
// extends, merged into one Document, with the --set values applied. Only the
// shape of the files is checked here (sections, sweep axes, trial tables,
// extends); values are checked per trial by host_keys.cpp and paths.cpp.
#pragma once

#include <toml++/toml.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format.hpp"

namespace runner::experiment::detail {

/// A configuration section ([model], [train], ...) and its keys.
struct Section {
  std::string name;
  const toml::key* key_src = nullptr;  // the header, or the key of the value that created it
  const toml::node* node = nullptr;    // the table, or the value that created the section
  std::vector<Leaf> items;             // plain keys; file order, base keys first after a merge
};

/// One axis of the sweep: a single key, or a zip group whose keys vary together.
struct Axis {
  std::string name;                    // the dotted key, or "zip.NAME"
  bool zip = false;
  const toml::key* key_src = nullptr;  // where the axis or group is written
  const toml::node* node = nullptr;
  std::vector<Leaf> keys;              // dotted key -> a non-empty toml::array of values
  [[nodiscard]] std::size_t size() const { return keys.front().node->as_array()->size(); }
};

/// One [[trial]] table: dotted keys and their values.
struct TrialTable {
  const toml::node* node = nullptr;
  std::vector<Leaf> overrides;
};

struct Document {
  std::vector<Section> sections;
  std::vector<Axis> axes;                        // in expansion order
  std::optional<std::vector<TrialTable>> trials;  // [[trial]]; replaced whole by a merge
  std::vector<const toml::node*> expects;        // [[expect]] tables, base files' first (expect.cpp)
};

/// Everything read for one experiment. The Document points into `trees`, and
/// a Checker into `origins`: not copyable, not movable.
struct Sources {
  Sources() = default;
  Sources(const Sources&) = delete;
  Sources& operator=(const Sources&) = delete;

  Origins origins;
  std::vector<std::unique_ptr<toml::table>> trees;  // one per file read and per --set value
  std::vector<SourceFile> files;                   // root first, then extended files as read
  Document doc;                                    // merged, --set applied
};

/// Reads `root` and everything it extends, merges them, and applies `set_overrides`
/// ("key=value" each) to the result. Throws runner::Error.
void load_sources(const std::filesystem::path& root, const std::vector<std::string>& set_overrides,
                  Sources& out);

/// Sets a dotted-key `leaf` in `sections`: replaces the value of the same key in
/// place, or appends it, adding the section when it is missing.
void apply_override(std::vector<Section>& sections, const Leaf& leaf);

}  // namespace runner::experiment::detail
