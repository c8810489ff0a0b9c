// Experiment files: TOML -> a validated, fully resolved Experiment.
//
// Two phases, because plugin search paths come from the file itself:
//   1. parse_experiment_file(): syntax, known sections and keys, types and
//      ranges of every host-level key; plugin tables are kept raw.
//   2. resolve_experiment(): plugin names looked up in a catalog and each
//      plugin table validated against the plugin's declared options.
// Every error is a runner::Error (ErrorKind::input) whose message starts with
// "file:line:col: " when the position is known. No LibTorch here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/common/error.hpp"
#include "runner/core/experiment/catalog.hpp"
#include "runner/options.hpp"

namespace runner {

/// A plugin chosen by an experiment section ([model], [data], [optimizer]) and its options.
struct PluginChoice {
  std::string plugin;       ///< plugin name
  Options options;          ///< validated, defaults filled
  SourceLocation where;     ///< location of the `plugin = ...` value
};

/// [device]
struct DeviceSettings {
  std::string type = "cpu";       ///< "cpu" | "cuda" | "auto"
  std::int64_t threads = 0;       ///< intra-op threads; 0 = LibTorch default
  std::int64_t interop_threads = 0;  ///< inter-op threads; 0 = LibTorch default
};

/// Host-level keys of [data] (the rest of the table are loader options).
struct DataSettings {
  std::int64_t batch_size = 32;   ///< samples per batch, >= 1
  bool shuffle = true;            ///< seeded shuffle of sample order each epoch
  bool drop_last = true;          ///< drop a final partial batch
};

/// [train]
struct TrainSettings {
  std::int64_t steps = 100;       ///< measured steps, >= 1
  std::int64_t warmup = 10;       ///< warm-up steps before measurement, >= 0
};

/// [infer]
struct InferSettings {
  std::int64_t batches = 100;     ///< measured batches, >= 1
  std::int64_t warmup = 10;       ///< warm-up batches, >= 0
  std::string mode = "inference"; ///< "inference" (torch::InferenceMode) | "no_grad"
};

/// A parsed experiment file before plugin options are validated.
class ParsedExperiment;

/// A fully validated experiment, ready to run.
struct Experiment {
  std::filesystem::path source_path;  ///< the experiment file as given
  std::string source_text;            ///< its full text (stored with the experiment)

  std::string name;                   ///< [experiment] name (default: file stem)
  std::string description;            ///< [experiment] description
  std::string kind = "train";         ///< "train" | "infer"
  std::int64_t seed = 0;              ///< global seed, >= 0
  std::int64_t repeats = 1;           ///< repetitions of the run, >= 1

  DeviceSettings device;
  PluginChoice model;                       ///< [model], required
  std::optional<PluginChoice> data;         ///< [data]; required for train
  DataSettings data_settings;
  std::optional<PluginChoice> optimizer;    ///< [optimizer]; required for train
  TrainSettings train;
  InferSettings infer;
  std::vector<std::filesystem::path> plugin_paths;  ///< [plugins] path, relative to the file's folder

  /// Canonical JSON of everything that defines the trial (sorted keys, no
  /// whitespace, no source text or path): equal configs give equal strings.
  [[nodiscard]] std::string resolved_json() const;
  /// Lowercase hex SHA-256 of resolved_json().
  [[nodiscard]] std::string config_hash() const;
};

/// Phase 1: reads and checks the file. Throws runner::Error.
[[nodiscard]] std::shared_ptr<const ParsedExperiment> parse_experiment_file(
    const std::filesystem::path& path);

/// Plugin search folders named by [plugins] path (absolute, resolved against the file's folder).
[[nodiscard]] std::vector<std::filesystem::path> plugin_paths_of(const ParsedExperiment& parsed);

/// Phase 2: resolves plugins against the catalog and validates their options. Throws runner::Error.
[[nodiscard]] Experiment resolve_experiment(const ParsedExperiment& parsed,
                                            const PluginCatalog& catalog);

/// Convenience: both phases.
[[nodiscard]] Experiment load_experiment(const std::filesystem::path& path,
                                         const PluginCatalog& catalog);

}  // namespace runner
