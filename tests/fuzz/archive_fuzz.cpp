// Fuzz target for what runner reads out of an exported model before LibTorch
// loads it (read_archive_metadata): the zip directory of a TorchScript
// archive or an AOTInductor package, runner.json or the package's
// *_metadata.json, and the runner.* keys (parse_meta_text). The input is a
// whole file, read both as a TorchScript archive and as a package of model
// "model". The only acceptable failure is runner::OptionError; metadata
// that passes must be within its limits. Anything else escaping, a crash, a
// read past the input, more than 1 s or 256 MB for one input is a defect.
//
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <cstddef>
#include <cstdint>
#include <string>

#include <runner/options.hpp>

#include "formats/export_meta.hpp"

namespace {

namespace exported = runner_models::exported;

void check(const std::string& file, exported::ArchiveKind kind) {
  try {
    const auto stored = exported::read_archive_metadata(
        file.size(),
        [&](std::uint64_t offset, std::size_t n) {
          return offset >= file.size() ? std::string() : file.substr(offset, n);
        },
        kind, "model", "file", "the file 'fuzz'");
    const exported::ExportMetaText meta = exported::parse_meta_text(stored, "file");
    std::uint64_t elements = 1;
    for (const std::int64_t size : meta.input_shape) {
      if (size < 0) __builtin_trap();
      elements *= static_cast<std::uint64_t>(size);
      if (elements > exported::kMaxInputElements) __builtin_trap();
    }
    if (!meta.input_dtype.empty() && !exported::known_dtype(meta.input_dtype)) __builtin_trap();
  } catch (const runner::OptionError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string file(reinterpret_cast<const char*>(data), size);
  check(file, exported::ArchiveKind::torchscript);
  check(file, exported::ArchiveKind::aoti);
  return 0;
}
