// The catalogue of claims (claims/, issue 32): every file validates with the
// built-in plugins alone, as `runner validate` sees it where a user runs it
// (a copy of claims/ beside experiments/, the data sets of
// scripts/make_datasets.py and the exported models of the fixture
// compared_models.make), and every file states what it claims and where the
// claim comes from. A file that needs a CUDA GPU validates on a machine with
// one; elsewhere it must stop at the device and nowhere before it. The files
// are read when the test runs, so a new one is checked without touching
// this file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"
#include "support/shipped_commands.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;
using test::Result;

const fs::path kSource = RUNNER_SOURCE_DIR;

// The four source articles, by the titles the files cite them with
// (../shared/seeds/README.md).
const std::vector<std::string> kSources = {
    "PyTorch-2.x镜像优化升级后,推理效率大幅提升",
    "PyTorch-CUDA-v2.9镜像处理图像分类任务的速度 benchmark",
    "PyTorch性能调优实战:从算子优化到分布式训练全攻略",
    "PyTorch-on-Debian GPU tuning checklist (untitled)",
};

std::vector<fs::path> claim_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kSource / "claims"))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A file whose own [device] asks for CUDA (read as TOML, not as text).
bool needs_cuda(const fs::path& file) {
  const toml::table t = toml::parse_file(file.string());
  return t["device"]["type"].value_or(std::string()) == "cuda";
}

bool has_cuda_device() { return fs::exists("/dev/nvidia0"); }

class ClaimsTest : public test::CliTestBase {
 protected:
  ClaimsTest() : CliTestBase("runner-claims-") {}
  Result runner(const std::string& args) const { return test::run_runner(args, dir_); }
};

TEST_F(ClaimsTest, EveryClaimFileValidates) {
  RUNNER_REQUIRE_ORACLE("numpy,PIL");
  // The layout a user runs the files in: claims/ and experiments/ side by
  // side (claim files extend shipped experiments), data/ and models/ beside.
  fs::copy(kSource / "claims", dir_ / "claims", fs::copy_options::recursive);
  fs::copy(kSource / "experiments", dir_ / "experiments", fs::copy_options::recursive);
  const auto made = test::run_project_script(
      "scripts/make_datasets.py", {(dir_ / "data").string(), "--formats", "image_folder",
                                   "--train", "20", "--eval", "5", "--image-size", "48"});
  ASSERT_EQ(made.code, 0) << made.output;
  fs::create_directory(dir_ / "models");
  ASSERT_TRUE(fs::exists(fs::path(RUNNER_COMPARED_MODELS) / "resnet18-b1.pt2"))
      << "the fixture compared_models.make writes " << RUNNER_COMPARED_MODELS;
  for (const auto& entry : fs::directory_iterator(RUNNER_COMPARED_MODELS))
    fs::create_symlink(entry.path(), dir_ / "models" / entry.path().filename());

  int cpu_files = 0;
  for (const fs::path& source : claim_files()) {
    SCOPED_TRACE(source.filename().string());
    const fs::path file = dir_ / "claims" / source.filename();
    const Result r = runner("validate " + file.string());
    if (needs_cuda(source) && !has_cuda_device()) {
      // Everything else was checked before the device: a bad [[expect]],
      // key or option would have been reported instead of this.
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_EQ(r.err,
                "error: device.type is \"cuda\" but no CUDA device is available\n"
                "hint: use device.type = \"cpu\" or \"auto\" on this machine\n");
      // ... as a broken copy shows: its first [[expect]]'s metric misspelt
      // is reported at the metric, not at the device.
      std::string text = test::slurp(file);
      const std::size_t metric = text.find("\nmetric = \"");
      ASSERT_NE(metric, std::string::npos);
      text.insert(metric + 11, "no_such_");
      const fs::path broken = test::write_file(dir_ / "claims" / ("broken_" + source.filename().string()), text);
      const Result b = runner("validate " + broken.string());
      EXPECT_EQ(b.code, 2);
      EXPECT_NE(b.err.find("unknown metric 'no_such_"), std::string::npos) << b.err;
      continue;
    }
    cpu_files += needs_cuda(source) ? 0 : 1;
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), file.string() + ": ok");
  }
  EXPECT_GE(cpu_files, 8);  // the catalogue's topics that run on a CPU
}

TEST_F(ClaimsTest, EveryFileStatesItsClaimsTheirSourcesAndHowToCheckThem) {
  int expectations = 0;
  for (const fs::path& file : claim_files()) {
    SCOPED_TRACE(file.filename().string());
    const toml::table t = toml::parse_file(file.string());
    const toml::array* expects = t["expect"].as_array();
    ASSERT_NE(expects, nullptr) << "no [[expect]] table";
    for (const toml::node& node : *expects) {
      const toml::table& e = *node.as_table();
      ++expectations;
      const std::string claim = e["claim"].value_or(std::string());
      const std::string source = e["source"].value_or(std::string());
      EXPECT_FALSE(claim.empty());
      // A claim names the article it comes from by its title, and where in it.
      EXPECT_TRUE(std::any_of(kSources.begin(), kSources.end(),
                              [&](const std::string& title) { return source.find(title) == 0; }))
          << "source '" << source << "' does not start with an article's title";
      EXPECT_NE(source.find(", "), std::string::npos)
          << "source '" << source << "' names no section";
    }
    // The header prints the command that checks the file, as it is written
    // to run from the source tree's root.
    const auto commands = test::header_commands(file);
    const std::string check = "runner check claims/" + file.filename().string();
    EXPECT_TRUE(std::any_of(commands.begin(), commands.end(), [&](const test::ShippedCommand& c) {
      return c.text == check || c.text.rfind(check + " ", 0) == 0;
    })) << "the header does not print `" << check << "`";
  }
  EXPECT_GE(expectations, 30);
}

}  // namespace
}  // namespace runner
