// What runner reads out of an exported model file before LibTorch loads it:
// the zip directory of a TorchScript archive or an AOTInductor package, the
// exporter's runner.json, and the runner.* keys of its metadata. No
// LibTorch: the fuzz build runs it on hostile bytes (tests/fuzz/archive_fuzz.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runner/weights/zip_directory.hpp"

namespace runner_models::exported {

/// The largest metadata file read (runner.json, an AOTInductor *_metadata.json).
inline constexpr std::uint64_t kMaxMetadataBytes = std::uint64_t{1} << 20;
/// The most elements of the input a model declares (runner.input_shape):
/// runner allocates an example batch of that shape.
inline constexpr std::uint64_t kMaxInputElements = std::uint64_t{1} << 31;

/// The exporter's runner.* keys, checked, with the dtype still a name.
struct ExportMetaText {
  std::vector<std::int64_t> input_shape;   ///< with the batch dimension
  std::string input_dtype;                 ///< "" when the file does not say
  std::int64_t input_high = 0;             ///< integer inputs: exclusive upper bound (0: unknown)
  std::vector<std::int64_t> dynamic_dims;  ///< dimensions of input_shape that may vary
  std::string torch_version;               ///< the torch that made the file ("" unknown)
  std::string device;                      ///< "cpu" or "cuda" ("" unknown)
  std::int64_t parameters = -1;            ///< parameter count (-1 unknown)
  std::map<std::string, std::string> raw;  ///< every key, as stored
};

/// "1,3,224,224" -> sizes; "" -> {}. Throws runner::OptionError(option) when malformed.
[[nodiscard]] std::vector<std::int64_t> parse_sizes(const std::string& text, const std::string& key,
                                                    const std::string& option);

/// Whether runner can feed inputs of the dtype named `name` ("float32", "int64", ...).
[[nodiscard]] bool known_dtype(const std::string& name);

/// The exporter's keys out of a file's metadata map (keys it does not know
/// are kept in raw). Refuses malformed sizes, an unknown dtype, an input
/// over kMaxInputElements, dynamic dimensions outside the input. Throws
/// runner::OptionError(option).
[[nodiscard]] ExportMetaText parse_meta_text(const std::map<std::string, std::string>& stored,
                                             const std::string& option);

/// The string values of a JSON object (runner.json, a *_metadata.json);
/// other values are skipped. Throws runner::OptionError(option) naming
/// `what` when the text is not a JSON object.
[[nodiscard]] std::map<std::string, std::string> metadata_json(const std::string& text,
                                                               const std::string& option,
                                                               const std::string& what);

/// Which exported file an archive is.
enum class ArchiveKind { torchscript, aoti };

/// Reads the zip directory of the archive of `file_size` bytes that `read`
/// reads, then its metadata: a TorchScript archive's <root>/extra/runner.json
/// (empty map without one), or every
/// <...>/data/aotinductor/<model_name>/*_metadata.json of an AOTInductor
/// package, merged (its files are only checked: LibTorch reads them again).
/// Refuses a damaged archive, a metadata file over kMaxMetadataBytes or
/// compressed, and metadata that is not a JSON object, naming `what`. Throws
/// runner::OptionError(option).
[[nodiscard]] std::map<std::string, std::string> read_archive_metadata(
    std::uint64_t file_size, const runner::weights::ZipRead& read, ArchiveKind kind,
    const std::string& model_name, const std::string& option, const std::string& what);

/// The same for the file at `path`.
[[nodiscard]] std::map<std::string, std::string> read_archive_metadata(
    const std::string& path, ArchiveKind kind, const std::string& model_name,
    const std::string& option, const std::string& what);

}  // namespace runner_models::exported
