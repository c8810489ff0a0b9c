// [kernel] (kind = "kernel"): the keys and their defaults, the identity, a
// sweep over shapes and implementations, and the errors of each at
// file:line:col (sections a kernel experiment has no use for, a missing
// shape, a shape too large to run).
#include "experiment_fixture.hpp"

namespace runner {
namespace {

const std::string kKernel =
    "[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\nshape = [1024, 1024]\n";

class KernelKeysTest : public test::ExperimentFixture {
 protected:
  KernelKeysTest() {
    OptionSchema scale;
    scale.number("factor", 2.5, "y = x * factor");
    catalog_.add(PluginKind::kernel, "scale", scale);
    catalog_.add(PluginKind::kernel, "softmax", OptionSchema{});
  }
};

TEST_F(KernelKeysTest, KeysHaveTheirDefaultsAndJoinTheIdentity) {
  const Experiment e = load(kKernel);
  EXPECT_EQ(e.kind, RunKind::kernel);
  ASSERT_TRUE(e.kernel.has_value());
  EXPECT_EQ(e.kernel->plugin, "scale");
  EXPECT_EQ(std::get<double>(e.kernel->options.at("factor")), 2.5);
  const KernelSettings& k = e.kernel_settings;
  EXPECT_EQ(k.shape, (std::vector<std::int64_t>{1024, 1024}));
  EXPECT_EQ(k.dtype, "float32");
  EXPECT_EQ(k.impl, "custom");
  EXPECT_EQ(k.calls, 100);
  EXPECT_EQ(k.warmup, 10);
  EXPECT_EQ(k.buffers, 0);
  EXPECT_FALSE(e.data.has_value());
  EXPECT_FALSE(e.optimizer.has_value());
  // No [model] in the identity of a kernel experiment; every [kernel] key is.
  EXPECT_EQ(e.resolved_json().find("\"model\""), std::string::npos);
  EXPECT_NE(e.resolved_json().find(
                "\"kernel\":{\"buffers\":0,\"calls\":100,\"dtype\":\"float32\",\"impl\":\"custom\","
                "\"options\":{\"factor\":2.5},\"plugin\":\"scale\",\"shape\":[1024,1024],"
                "\"warmup\":10}"),
            std::string::npos)
      << e.resolved_json();
  std::vector<std::string> hashes{e.config_hash()};
  for (const std::string& extra :
       {std::string("dtype = \"bfloat16\"\n"), std::string("impl = \"native\"\n"),
        std::string("calls = 50\n"), std::string("warmup = \"auto\"\n"), std::string("buffers = 1\n"),
        std::string("factor = 3.0\n")}) {
    hashes.push_back(load(kKernel + extra).config_hash());
    for (std::size_t i = 0; i + 1 < hashes.size(); ++i) EXPECT_NE(hashes[i], hashes.back()) << extra;
  }
  EXPECT_EQ(load(kKernel + "warmup = \"auto\"\n").kernel_settings.warmup, -1);
}

TEST_F(KernelKeysTest, ShapesImplementationsAndKernelsSweep) {
  const auto trials = expand(kKernel +
                             "[sweep]\n\"kernel.shape\" = [[1024, 1024], [8192, 8192]]\n"
                             "\"kernel.impl\" = [\"custom\", \"native\", \"eager\"]\n");
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[5].experiment.kernel_settings.shape, (std::vector<std::int64_t>{8192, 8192}));
  EXPECT_EQ(trials[5].experiment.kernel_settings.impl, "eager");
  const auto by_kernel = expand(kKernel, {"kernel.plugin=\"softmax\"", "kernel.dtype=float16"});
  EXPECT_EQ(by_kernel[0].experiment.kernel->plugin, "softmax");
  EXPECT_EQ(by_kernel[0].experiment.kernel_settings.dtype, "float16");
}

TEST_F(KernelKeysTest, ErrorsAtTheKey) {
  EXPECT_THROW_MSG(static_cast<void>(load("[experiment]\nkind = \"kernel\"\n")), Error,
                   file() + ": kernel experiments need a [kernel] section");
  EXPECT_EQ(std::string(error_of("[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\n")
                            .what()),
            at(3, 1) + "missing required key 'shape' in [kernel]");
  EXPECT_EQ(std::string(error_of(kKernel + "[model]\nplugin = \"mlp\"\n").what()),
            at(6, 1) + "section [model] is not used by kernel experiments");
  EXPECT_EQ(std::string(error_of(kKernel + test::kData).what()),
            at(6, 1) + "section [data] is not used by kernel experiments");
  EXPECT_EQ(std::string(error_of(test::kMinimal + "[kernel]\nplugin = \"scale\"\nshape = [4]\n").what()),
            at(8, 1) + "section [kernel] is only used by kernel experiments");
  EXPECT_EQ(std::string(error_of("[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\n"
                                 "shape = [65536, 65536, 2]\n")
                            .what()),
            at(5, 9) + "kernel.shape has more than 4294967296 elements");
  EXPECT_EQ(std::string(error_of("[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\n"
                                 "shape = [4, 0]\n")
                            .what()),
            at(5, 13) + "'kernel.shape[1]' must be between 1 and 4294967296, found 0");
  EXPECT_EQ(std::string(error_of("[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\n"
                                 "shape = []\n")
                            .what()),
            at(5, 9) + "'kernel.shape' must have between 1 and 8 items, found 0");
  EXPECT_EQ(std::string(error_of(kKernel + "impl = \"fast\"\n").what()),
            at(6, 8) + "'kernel.impl' must be one of \"custom\", \"native\", \"eager\", found \"fast\"");
  EXPECT_EQ(std::string(error_of(kKernel + "buffers = 5000\n").what()),
            at(6, 11) + "'kernel.buffers' must be between 0 and 4096, found 5000");
  EXPECT_EQ(std::string(error_of("[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"matmul\"\n"
                                 "shape = [4]\n")
                            .what()),
            at(4, 10) + "unknown kernel plugin 'matmul'");
}

}  // namespace
}  // namespace runner
