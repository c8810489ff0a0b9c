#include "export_meta.hpp"

#include <runner/options.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace runner_models::exported {
namespace {

using runner::OptionError;

constexpr std::array<std::string_view, 7> kDtypes{"float32", "float64", "float16", "bfloat16",
                                                  "int64",   "int32",   "uint8"};

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::int64_t> parse_sizes(const std::string& text, const std::string& key,
                                      const std::string& option) {
  std::vector<std::int64_t> sizes;
  if (text.empty()) return sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + end, value);
    if (ec != std::errc{} || ptr != text.data() + end || value < 0)
      throw OptionError(option, "its metadata key " + key + " = '" + text +
                                    "' is not a list of sizes; export it again with runner-export");
    sizes.push_back(value);
    start = end + 1;
  }
  return sizes;
}

bool known_dtype(const std::string& name) {
  return std::find(kDtypes.begin(), kDtypes.end(), name) != kDtypes.end();
}

ExportMetaText parse_meta_text(const std::map<std::string, std::string>& stored,
                               const std::string& option) {
  ExportMetaText meta;
  meta.raw = stored;
  const auto get = [&](const std::string& key) -> std::string {
    const auto it = meta.raw.find(key);
    return it == meta.raw.end() ? std::string() : it->second;
  };
  meta.input_shape = parse_sizes(get("runner.input_shape"), "runner.input_shape", option);
  std::uint64_t elements = 1;
  bool too_many = false;
  for (const std::int64_t size : meta.input_shape)
    too_many = too_many ||
               __builtin_mul_overflow(elements, static_cast<std::uint64_t>(size), &elements) ||
               elements > kMaxInputElements;
  if (too_many)
    throw OptionError(option, "its metadata key runner.input_shape = '" + get("runner.input_shape") +
                                  "' declares more than " + std::to_string(kMaxInputElements) +
                                  " (2^31) input elements, more than runner feeds a model");
  meta.dynamic_dims = parse_sizes(get("runner.dynamic_dims"), "runner.dynamic_dims", option);
  const std::string dtype = get("runner.input_dtype");
  if (!dtype.empty() && !known_dtype(dtype))
    throw OptionError(option, "its input dtype '" + dtype +
                                  "' is not one runner can feed (float32, float64, "
                                  "float16, bfloat16, int64, int32, uint8)");
  meta.input_dtype = dtype;
  if (const auto high = parse_sizes(get("runner.input_high"), "runner.input_high", option);
      !high.empty())
    meta.input_high = high.front();
  if (const auto n = parse_sizes(get("runner.parameters"), "runner.parameters", option); !n.empty())
    meta.parameters = n.front();
  meta.torch_version = get("runner.torch_version");
  meta.device = get("runner.device");
  if (meta.device.empty()) meta.device = get("AOTI_DEVICE_KEY");  // a package says so itself
  return meta;
}

std::map<std::string, std::string> metadata_json(const std::string& text, const std::string& option,
                                                 const std::string& what) {
  // Depth-limited: nlohmann parses recursively, and a metadata file is flat.
  int depth = 0;
  const auto json = nlohmann::json::parse(
      text,
      [&](int level, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if (event == nlohmann::json::parse_event_t::object_start ||
            event == nlohmann::json::parse_event_t::array_start)
          depth = std::max(depth, level + 1);
        if (depth > 16) throw OptionError(option, what + " holds metadata nested more than 16 deep");
        return true;
      },
      /*allow_exceptions=*/false);
  if (!json.is_object())
    throw OptionError(option, what + " holds a metadata file that is not a JSON object");
  std::map<std::string, std::string> stored;
  for (const auto& [key, value] : json.items())
    if (value.is_string()) stored[key] = value.get<std::string>();
  return stored;
}

std::map<std::string, std::string> read_archive_metadata(std::uint64_t file_size,
                                                         const runner::weights::ZipRead& read,
                                                         ArchiveKind kind,
                                                         const std::string& model_name,
                                                         const std::string& option,
                                                         const std::string& what) {
  const char* is_not = kind == ArchiveKind::torchscript ? " is not a TorchScript module ("
                                                        : " is not an AOTInductor package (";
  std::vector<runner::weights::ZipEntry> entries;
  try {
    entries = runner::weights::read_zip_directory(file_size, read);
  } catch (const runner::weights::ZipError& e) {
    throw OptionError(option, what + is_not + e.what() + ")");
  }
  if (entries.empty()) throw OptionError(option, what + is_not + "its zip archive is empty)");
  // TorchScript: LibTorch names every record after the first one's folder.
  const std::string root = entries.front().name.substr(0, entries.front().name.find('/'));
  const std::string model_folder = "data/aotinductor/" + model_name + "/";
  std::map<std::string, std::string> stored;
  for (const auto& e : entries) {
    const bool wanted =
        kind == ArchiveKind::torchscript
            ? e.name == root + "/extra/runner.json"
            : ends_with(e.name, "_metadata.json") && e.name.find(model_folder) != std::string::npos;
    if (!wanted) continue;
    if (e.method != 0 || e.stored != e.size)
      throw OptionError(option, what + " has its metadata '" + e.name +
                                    "' compressed; runner-export stores it uncompressed");
    if (e.size > kMaxMetadataBytes)
      throw OptionError(option, what + " has a metadata file '" + e.name + "' of " +
                                    std::to_string(e.size) + " bytes, more than the " +
                                    std::to_string(kMaxMetadataBytes) + " runner reads");
    const std::string text = read(e.data, static_cast<std::size_t>(e.size));
    if (text.size() != e.size)
      throw OptionError(option, what + is_not + "its record '" + e.name + "' is cut short)");
    for (auto& [key, value] : metadata_json(text, option, what + " ('" + e.name + "')"))
      stored[key] = std::move(value);
  }
  return stored;
}

std::map<std::string, std::string> read_archive_metadata(const std::string& path, ArchiveKind kind,
                                                         const std::string& model_name,
                                                         const std::string& option,
                                                         const std::string& what) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || !std::filesystem::is_regular_file(path, ec))
    throw OptionError(option, what + " is not a readable file");
  std::ifstream in(path, std::ios::binary);
  const runner::weights::ZipRead read = runner::weights::zip_read_of(in);
  return read_archive_metadata(size, read, kind, model_name, option, what);
}

}  // namespace runner_models::exported
