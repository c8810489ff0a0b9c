// Shared by the experiment layer's tests: a plugin catalog without shared
// libraries, and a fixture that writes experiment files into a fresh folder.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/experiment/experiment.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner::test {

namespace fs = std::filesystem;

// A catalog without any shared library: the plugins the tests validate against.
class FakeCatalog final : public PluginCatalog {
 public:
  void add(PluginKind kind, std::string name, OptionSchema schema) {
    PluginDescriptor plugin;
    plugin.kind = kind;
    plugin.name = std::move(name);
    plugin.schema = std::move(schema);
    plugin.library = "/fake/lib" + plugin.name + ".so";
    plugins_.push_back(std::move(plugin));
  }
  [[nodiscard]] const PluginDescriptor* find(PluginKind kind,
                                             const std::string& name) const override {
    for (const auto& plugin : plugins_)
      if (plugin.kind == kind && plugin.name == name) return &plugin;
    return nullptr;
  }
  [[nodiscard]] std::vector<std::string> names(PluginKind kind) const override {
    std::vector<std::string> out;
    for (const auto& plugin : plugins_)
      if (plugin.kind == kind) out.push_back(plugin.name);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::vector<PluginDescriptor> plugins_;
};

inline FakeCatalog standard_catalog() {
  FakeCatalog catalog;
  OptionSchema mlp;
  mlp.integers("hidden", {64}, "hidden widths").range(1, std::nullopt).at_least(1);
  mlp.string("activation", "relu", "non-linearity").one_of({"relu", "gelu", "tanh"});
  mlp.number("dropout", 0.0, "dropout probability").range(0.0, 1.0);
  catalog.add(PluginKind::model, "mlp", mlp);

  OptionSchema resnet;
  resnet.integer("depth", 18, "layers").range(std::nullopt, 152);
  catalog.add(PluginKind::model, "resnet", resnet);

  OptionSchema synthetic;
  synthetic.integer("size", 1024, "samples").range(1, std::nullopt);
  synthetic.integers("shape", {8}, "sample shape").at_least(1);
  synthetic.string("label", "", "free text");
  catalog.add(PluginKind::loader, "synthetic", synthetic);

  OptionSchema files;
  files.string("path", "", "a data folder").path();
  files.strings("extra", {}, "more files").path();
  files.string("name", "", "not a path");
  catalog.add(PluginKind::loader, "files", files);

  OptionSchema sgd;
  sgd.number("lr", 0.0, "learning rate").range(0.0, std::nullopt).required();
  sgd.number("momentum", 0.0, "momentum").range(0.0, 1.0);
  catalog.add(PluginKind::optimizer, "sgd", sgd);

  OptionSchema adam;
  adam.number("lr", 0.001, "learning rate").range(0.0, std::nullopt);
  adam.numbers("betas", {0.9, 0.999}, "moment decay").range(0.0, 1.0).at_least(2);
  catalog.add(PluginKind::optimizer, "adam", adam);

  OptionSchema lamb;
  lamb.numbers("betas", {0.9, 0.999}, "moment decay").range(0.0, 1.0).items(2, 2);
  lamb.strings("no_decay", {"bias", "norm"}, "exempt from weight decay").items(0, 3);
  lamb.strings("groups", {"a"}, "named groups").one_of({"a", "b"}).items(1, 2);
  lamb.integers("sizes", {}, "at most two").items(0, 2);
  catalog.add(PluginKind::optimizer, "lamb", lamb);

  catalog.add(PluginKind::comm_hook, "allreduce", OptionSchema{});
  OptionSchema compressed;
  compressed.string("dtype", "fp16", "precision on the wire").one_of({"fp16", "bf16"});
  catalog.add(PluginKind::comm_hook, "compressed_allreduce", compressed);
  return catalog;
}

// Plugin sections a train experiment needs, for tests about something else.
const std::string kData = "[data]\nplugin = \"synthetic\"\n";
const std::string kOptimizer = "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n";
const std::string kModel = "[model]\nplugin = \"mlp\"\n";
const std::string kMinimal = kModel + kData + kOptimizer;

// Each test gets its own folder of experiment files.
class ExperimentFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("runner_experiment_test_" + std::to_string(::getpid()) +
                                        "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path write(const std::string& text, const std::string& name = "exp.toml") {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  Experiment load(const std::string& text, const std::string& name = "exp.toml") {
    return load_experiment(write(text, name), catalog_);
  }
  // The error loading `text` raises; records a failure if there is none.
  Error error_of(const std::string& text, const PluginCatalog* catalog = nullptr) {
    const fs::path path = write(text);
    try {
      static_cast<void>(load_experiment(path, catalog != nullptr ? *catalog : catalog_));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      EXPECT_EQ(e.exit_code(), 2);
      return e;
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return Error("(no error)");
  }
  // Every trial of `text` (written to `name`), with --set `sets`.
  std::vector<Trial> expand(const std::string& text, const std::vector<std::string>& sets = {},
                            const std::string& name = "exp.toml") {
    return expand_trials(*parse_experiment_file(write(text, name), sets), catalog_);
  }
  // The error parsing and expanding `text` raises; records a failure if there is none.
  Error expand_error(const std::string& text, const std::vector<std::string>& sets = {}) {
    try {
      static_cast<void>(expand(text, sets));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      return e;
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return Error("(no error)");
  }
  // "<dir>/exp.toml" as the messages spell it, optionally with ":line:col".
  std::string file() const { return (dir_ / "exp.toml").string(); }
  std::string at(int line, int column) const {
    return file() + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  }

  // "<dir>/NAME:line:col: " for a file other than exp.toml.
  std::string at(const std::string& name, int line, int column) const {
    return (dir_ / name).string() + ":" + std::to_string(line) + ":" + std::to_string(column) +
           ": ";
  }

  fs::path dir_;
  FakeCatalog catalog_ = standard_catalog();
};

}  // namespace runner::test
