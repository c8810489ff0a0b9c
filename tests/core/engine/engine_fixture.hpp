// What the engine's in-process tests share: the experiment they start from
// (an MLP on synthetic data with SGD, each test changing what it is about)
// and a fixture that runs an experiment against the built-in plugins.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "runner/engine/engine.hpp"

namespace runner::test {

inline const std::filesystem::path kBuiltinPlugins =
    std::filesystem::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

/// The `synthetic` loader's options: `size` samples of `shape` in 4 classes, no label noise.
inline Options synthetic_options(std::vector<std::int64_t> shape, std::int64_t size) {
  return Options({{"shape", std::move(shape)},
                  {"classes", std::int64_t{4}},
                  {"size", size},
                  {"label_noise", 0.0},
                  {"data_seed", std::int64_t{0}}});
}

/// Training an MLP (16 -> hidden -> 4, ReLU) on 512 synthetic samples in
/// batches of 32 with SGD (lr 0.1, momentum 0.9); steps and warm-up as the
/// Experiment defaults them, for each test to set.
inline Experiment mlp_sgd(std::string name, std::int64_t seed, std::int64_t hidden = 32) {
  Experiment e;
  e.name = std::move(name);
  e.kind = RunKind::train;
  e.seed = seed;
  e.model = {"mlp", Options({{"hidden", std::vector<std::int64_t>{hidden}},
                             {"activation", std::string("relu")},
                             {"dropout", 0.0}})};
  e.data = PluginChoice{"synthetic", synthetic_options({16}, 512)};
  e.data_settings.batch_size = 32;
  e.optimizer = PluginChoice{"sgd", Options({{"lr", 0.1},
                                             {"momentum", 0.9},
                                             {"nesterov", false},
                                             {"weight_decay", 0.0}})};
  return e;
}

/// A test that runs experiments in this process against the built-in plugins.
class EngineFixture : public ::testing::Test {
 protected:
  void SetUp() override { host_.load(kBuiltinPlugins); }
  RunOutcome run(const Experiment& e) {
    // As the run process does before it runs. A data-parallel test's
    // device.threads = 1 keeps OpenMP's pool from starting in this process:
    // a rank forked after it started would hang in its first parallel region
    // (libgomp is not fork-safe), so several such tests can share a process.
    configure_runtime(e);
    RunRequest request;
    request.experiment = &e;
    request.host = &host_;
    return execute_run(request);
  }
  /// A metric of the run, NaN when it has none.
  static double metric(const RunOutcome& o, const std::string& name) {
    for (const auto& m : o.metrics)
      if (m.name == name) return m.value;
    return std::nan("");
  }
  PluginHost host_;
};

}  // namespace runner::test
