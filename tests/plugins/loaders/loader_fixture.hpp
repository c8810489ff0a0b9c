// What the file-format loaders' tests share: the built-in plugins, a fresh
// folder per test to write tiny data sets into, and a loader made through
// the host (so errors arrive as users see them) with its options' defaults.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <runner/sdk.hpp>

#include "runner/host/host.hpp"

namespace runner::test {

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.load(std::filesystem::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins");
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("runner_loader_test_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  /// Loader `name` with `values` over its defaults, for `split`.
  std::unique_ptr<Loader> make(const std::string& name, std::map<std::string, OptionValue> values,
                               Split split = Split::train, bool skip = false) {
    const PluginDescriptor* plugin = host_.find(PluginKind::loader, name);
    EXPECT_NE(plugin, nullptr) << name;
    for (const OptionSpec& spec : plugin->schema.specs())
      if (values.count(spec.name) == 0 && spec.default_value) values[spec.name] = *spec.default_value;
    LoaderContext context;
    context.split = split;
    context.skip_bad_samples = skip;
    return host_.make_loader(name, Options(std::move(values)), context);
  }

  /// The message making the loader gives (a DataError, as the host reports it), or "".
  std::string error_of(const std::string& name, std::map<std::string, OptionValue> values,
                       Split split = Split::train) {
    try {
      (void)make(name, std::move(values), split);
    } catch (const PluginOptionError& e) {
      return "option " + e.option() + ": " + e.detail();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  /// Writes `bytes` to `name` under the test's folder; returns its path.
  std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    const std::filesystem::path path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }

  PluginHost host_;
  std::filesystem::path dir_;
};

}  // namespace runner::test
