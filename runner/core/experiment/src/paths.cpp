// The paths an experiment writes: every relative path is relative to the
// file that writes it (one resolver, absolute_path, for host keys, [plugins]
// path and plugin path options); the files named by content (init_from,
// check_against, content() options) hashed once; save_to names that tell
// runs apart.
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "parsed_experiment.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"

namespace runner {

namespace fs = std::filesystem;

using experiment::detail::Leaf;
using experiment::detail::Section;

std::filesystem::path ParsedExperiment::absolute_path(const std::string& text,
                                                      const toml::node& node) const {
  fs::path p(text);
  if (p.is_relative()) {
    const auto* origin = check_.origin_of(node);
    p = (origin != nullptr ? origin->folder : defaults_.source->path.parent_path()) / p;
  }
  return fs::absolute(p).lexically_normal();
}

std::string ParsedExperiment::read_path(const toml::node& node, const std::string& dotted) const {
  const auto* text = node.as_string();
  if (text == nullptr)
    check_.fail(node, "'" + dotted + "' must be a string, found " +
                          experiment::detail::describe(node));
  if (text->get().empty()) check_.fail(node, "'" + dotted + "' must not be empty");
  return absolute_path(text->get(), node).string();
}

OptionValue ParsedExperiment::resolve_paths(const OptionValue& value,
                                            const toml::node& node) const {
  auto resolve = [&](const std::string& text) {
    return text.empty() ? text : absolute_path(text, node).string();
  };
  if (const auto* one = std::get_if<std::string>(&value)) return OptionValue{resolve(*one)};
  if (const auto* many = std::get_if<std::vector<std::string>>(&value)) {
    std::vector<std::string> out;
    for (const auto& text : *many) out.push_back(resolve(text));
    return OptionValue{std::move(out)};
  }
  return value;
}

void ParsedExperiment::read_path_list(const toml::node& node, const std::string& dotted,
                                      Experiment& e) const {
  e.plugin_paths.clear();  // an extending file's list replaces the base's
  if (node.is_string()) {
    e.plugin_paths.emplace_back(read_path(node, dotted));
    return;
  }
  const auto* array = node.as_array();
  if (array == nullptr)
    check_.fail(node, "'" + dotted + "' must be a string or a list of strings, found " +
                          experiment::detail::describe(node));
  for (std::size_t i = 0; i < array->size(); ++i)
    e.plugin_paths.emplace_back(read_path(*array->get(i), dotted + "[" + std::to_string(i) + "]"));
}

// The weights file must be there now (a missing file is an input error, not a
// failed run), and its bytes join the trial's identity. Its contents are
// checked against the model before any run starts (the engine's preflight).
// The same for the reference outputs of check_against.
void ParsedExperiment::check_weights(const std::vector<Section>& sections,
                                     HostConfig& config) const {
  ModelSettings& model = config.experiment.model_settings;
  const auto node_of = [&](const std::string& key) -> const toml::node* {
    const toml::node* where = nullptr;
    for (const Section& section : sections)
      if (section.name == "model")
        for (const Leaf& leaf : section.items)
          if (leaf.key == key) where = leaf.node;
    return where;
  };
  if (!model.init_from.empty())
    model.init_from_sha256 = file_sha256(
        model.init_from, "model.init_from", node_of("init_from"),
        "give a .safetensors file or a state dict saved with torch.save(model.state_dict(), "
        "path); a relative path is relative to the file that writes it");
  if (!model.check_against.empty())
    model.check_against_sha256 = file_sha256(
        model.check_against, "model.check_against", node_of("check_against"),
        "give the .reference.safetensors file runner-export writes (tensors 'input' and "
        "'output'); a relative path is relative to the file that writes it");
}

std::string ParsedExperiment::file_sha256(const fs::path& path, const std::string& dotted,
                                          const toml::node* node, const std::string& hint) const {
  const auto fail = [&](const std::string& what) {
    const std::string message = dotted + " names '" + path.string() + "', " + what;
    if (node != nullptr) throw check_.error(*node, message, hint);
    throw Error(check_.nowhere(), message, hint);
  };
  if (const auto cached = file_sha256_.find(path); cached != file_sha256_.end())
    return cached->second;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) fail("which does not exist");
  if (fs::is_directory(status)) fail("which is a directory");
  if (!fs::is_regular_file(status)) fail("which is not a regular file");
  std::string sha;
  try {
    sha = sha256_file_hex(path);
  } catch (const Error& e) {
    fail(std::string("which cannot be read: ") + e.what());
  }
  file_sha256_.emplace(path, sha);
  return sha;
}

// One save_to file per run: with several trials or repetitions the name must
// tell them apart, or the last run would overwrite the others.
void ParsedExperiment::check_save_to(std::int64_t repeats) const {
  for (const Section& section : sources_.doc.sections) {
    if (section.name != "train") continue;
    for (const Leaf& leaf : section.items) {
      if (leaf.key != "save_to" || leaf.node->as_string() == nullptr) continue;
      const std::string& text = leaf.node->as_string()->get();
      std::vector<std::string> missing;
      if (trial_count() > 1 && text.find("{trial}") == std::string::npos)
        missing.emplace_back("{trial}");
      if (repeats > 1 && text.find("{repeat}") == std::string::npos)
        missing.emplace_back("{repeat}");
      if (!missing.empty())
        throw check_.error(*leaf.node,
                           "'train.save_to' names one file for " +
                               std::to_string(trial_count()) + " trial(s) x " +
                               std::to_string(repeats) +
                               " repetition(s): every run would overwrite it",
                           "put " + join(missing, " and ") +
                               " in the name, e.g. save_to = \"weights-{trial}-{repeat}.safetensors\"");
    }
  }
}

}  // namespace runner
