// `runner rerun`: a recorded run's exact configuration, written back as an
// experiment file of its own so that it runs through the same path as any
// other (validation, identity, resume, recording). No LibTorch here.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runner/store/store.hpp"

namespace runner {

/// A stored resolved configuration (canonical JSON) as the text of an
/// experiment file named `name`, loading `plugins` by their library paths.
/// Throws runner::Error (run kind) when the configuration holds a value an
/// experiment file cannot express.
[[nodiscard]] std::string rerun_toml(const std::string& config_json, const std::string& name,
                                     const std::vector<store::PluginRecord>& plugins);

/// The experiment file of a rerun, in a private temporary folder that is
/// removed with this object.
class RerunFile {
 public:
  /// Writes the file for `run`. Throws runner::Error (input) when a plugin
  /// library the run used no longer exists.
  explicit RerunFile(const store::RunDetail& run);
  RerunFile(const RerunFile&) = delete;
  RerunFile& operator=(const RerunFile&) = delete;
  ~RerunFile();

  /// The experiment file.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// For the user: plugin libraries whose file changed since the run.
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path path_;
  std::vector<std::string> warnings_;
};

}  // namespace runner
