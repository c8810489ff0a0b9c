// Fuzz target for the experiment loader: parse, `extends`, `--set`, sweep
// expansion and validation, against a catalog of plugins that declare options
// of every type. The only acceptable failure is runner::Error (bad input,
// reported with a message); anything else escaping, a crash, a leak, more
// than 1 s or 256 MB for one input is a defect.
//
// Input: up to four parts separated by NUL bytes (NUL cannot appear in TOML):
//   part 0   the experiment file, exp.toml
//   part 1   base.toml   (reachable through extends = "base.toml")
//   part 2   other.toml  (reachable through extends = "other.toml")
//   part 3   --set arguments, one per line
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/experiment/experiment.hpp"

namespace fs = std::filesystem;

namespace {

class FuzzCatalog final : public runner::PluginCatalog {
 public:
  FuzzCatalog() {
    using runner::OptionSchema;
    using runner::PluginKind;
    OptionSchema model;
    model.integers("hidden", {64}, "widths").range(1, 4096).at_least(1);
    model.string("activation", "relu", "non-linearity").one_of({"relu", "gelu", "tanh"});
    model.number("dropout", 0.0, "probability").range(0.0, 0.99);
    model.boolean("bias", true, "use bias");
    model.numbers("scales", {1.0, 2.0}, "per-layer scales").at_least(2);
    model.integer("depth", 18, "layers").range(std::nullopt, 152);
    model.strings("no_decay", {"bias", "norm"}, "patterns").items(0, 8);
    model.numbers("betas", {0.9, 0.999}, "exactly two").items(2, 2);
    add(PluginKind::model, "mlp", model);
    OptionSchema required;
    required.string("path", "", "a file").required();
    add(PluginKind::model, "needs_path", required);
    OptionSchema loader;
    loader.integers("shape", {8}, "sample shape").range(1, 65536).at_least(1);
    loader.integer("classes", 10, "classes").range(1, 100000);
    loader.integer("size", 1024, "samples").range(1, 1 << 24);
    add(PluginKind::loader, "synthetic", loader);
    OptionSchema sgd;
    sgd.number("lr", 0.01, "learning rate").range(0.0, std::nullopt);
    sgd.number("momentum", 0.0, "momentum").range(0.0, 1.0);
    add(PluginKind::optimizer, "sgd", sgd);
    add(PluginKind::comm_hook, "allreduce", OptionSchema{});
    OptionSchema compressed;
    compressed.string("dtype", "fp16", "wire precision").one_of({"fp16", "bf16"});
    add(PluginKind::comm_hook, "compressed_allreduce", compressed);
  }

  [[nodiscard]] const runner::PluginDescriptor* find(runner::PluginKind kind,
                                                     const std::string& name) const override {
    for (const auto& plugin : plugins_)
      if (plugin.kind == kind && plugin.name == name) return &plugin;
    return nullptr;
  }
  [[nodiscard]] std::vector<std::string> names(runner::PluginKind kind) const override {
    std::vector<std::string> out;
    for (const auto& plugin : plugins_)
      if (plugin.kind == kind) out.push_back(plugin.name);
    return out;
  }

 private:
  void add(runner::PluginKind kind, std::string name, runner::OptionSchema schema) {
    runner::PluginDescriptor plugin;
    plugin.kind = kind;
    plugin.name = std::move(name);
    plugin.schema = std::move(schema);
    plugin.library = "/fuzz/" + plugin.name + ".so";
    plugins_.push_back(std::move(plugin));
  }
  std::vector<runner::PluginDescriptor> plugins_;
};

// A folder of this process's own, on a RAM disk where there is one.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    std::error_code ec;
    const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm")
                                                           : fs::temp_directory_path();
    fs::path d = base / ("runner-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void write_file(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const FuzzCatalog catalog;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (parts.size() < 3) {
    const std::size_t nul = input.find('\0', start);
    if (nul == std::string_view::npos) break;
    parts.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  parts.push_back(input.substr(start));
  parts.resize(4);

  const fs::path& dir = work_dir();
  write_file(dir / "exp.toml", parts[0]);
  write_file(dir / "base.toml", parts[1]);
  write_file(dir / "other.toml", parts[2]);
  std::vector<std::string> sets;
  std::size_t line_start = 0;
  while (line_start < parts[3].size() && sets.size() < 8) {
    std::size_t end = parts[3].find('\n', line_start);
    if (end == std::string_view::npos) end = parts[3].size();
    if (end > line_start) sets.emplace_back(parts[3].substr(line_start, end - line_start));
    line_start = end + 1;
  }
  try {
    const auto parsed = runner::parse_experiment_file(dir / "exp.toml", sets);
    (void)runner::plugin_paths_of(*parsed);
    if (runner::trial_count(*parsed) <= 1000) {
      for (const runner::Trial& trial : runner::expand_trials(*parsed, catalog))
        (void)trial.experiment.config_hash();
    }
  } catch (const runner::Error&) {
    // Bad input, reported: what runner must do.
  }
  return 0;
}
