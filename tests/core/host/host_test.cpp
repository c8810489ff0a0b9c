// The plugin host against real shared libraries built by the suite.
#include "runner/host/host.hpp"

#include <gtest/gtest.h>

#include <runner/sdk.hpp>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kTestPlugins = fs::path(RUNNER_BINARY_DIR) / "tests" / "plugins";
const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

fs::path plugin_file(const std::string& name) {
  return fs::canonical(kTestPlugins / name / ("runner_plugin_test_" + name + ".so"));
}

std::string abi_summary() {
  const runner::HostAbi abi = runner::host_abi();
  return "SDK ABI " + std::to_string(abi.abi_version) + ", runner " + abi.runner_version +
         ", LibTorch " + abi.torch_version + ", " + abi.compiler +
         ", _GLIBCXX_USE_CXX11_ABI=" + std::to_string(abi.cxx11_abi) + ", CUDA " +
         (abi.cuda ? "on" : "off");
}

TEST(PluginHost, LoadsBuiltinsFromFolderAndListsThemSorted) {
  runner::PluginHost host;
  host.load(kBuiltins);
  EXPECT_EQ(host.names(runner::PluginKind::model), std::vector<std::string>{"mlp"});
  EXPECT_EQ(host.names(runner::PluginKind::optimizer), std::vector<std::string>{"sgd"});
  EXPECT_EQ(host.names(runner::PluginKind::loader), std::vector<std::string>{"synthetic"});
  EXPECT_EQ(host.names(runner::PluginKind::comm_hook),
            (std::vector<std::string>{"allreduce", "compressed_allreduce"}));
  EXPECT_TRUE(host.names(runner::PluginKind::kernel).empty());
  ASSERT_EQ(host.libraries().size(), 4u);
  const runner::PluginDescriptor* mlp = host.find(runner::PluginKind::model, "mlp");
  ASSERT_NE(mlp, nullptr);
  ASSERT_NE(mlp->schema.find("hidden"), nullptr);
  EXPECT_EQ(mlp->schema.find("hidden")->type, runner::OptionType::integer_list);
  EXPECT_EQ(host.find(runner::PluginKind::optimizer, "mlp"), nullptr);
}

TEST(PluginHost, RecordsPathVersionAndSha256OfEachLibrary) {
  runner::PluginHost host;
  host.load(plugin_file("good"));
  const runner::LoadedLibrary& lib = host.library_of(runner::PluginKind::model, "tiny_linear");
  EXPECT_EQ(lib.path, plugin_file("good"));
  EXPECT_EQ(lib.plugin_version, RUNNER_VERSION_STRING);
  EXPECT_EQ(lib.sha256.size(), 64u);
  EXPECT_EQ(lib.sha256.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(PluginHost, LoadingTheSameLibraryTwiceIsANoOp) {
  runner::PluginHost host;
  host.load(plugin_file("good"));
  host.load(kTestPlugins / "good");
  EXPECT_EQ(host.libraries().size(), 1u);
  EXPECT_EQ(host.names(runner::PluginKind::model), std::vector<std::string>{"tiny_linear"});
}

TEST(PluginHost, RejectsMismatchedAbiNamingFileExpectedAndFound) {
  runner::PluginHost host;
  const fs::path file = plugin_file("bad_abi");
  EXPECT_THROW_MSG(host.load(file), runner::Error,
                   "plugin library '" + file.string() +
                       "' does not match this runner: SDK ABI version: expected " +
                       std::to_string(RUNNER_SDK_ABI_VERSION) + ", found 999");
  try {
    host.load(file);
  } catch (const runner::Error& e) {
    EXPECT_EQ(e.hint(), "rebuild the plugin against this runner's SDK (" + abi_summary() + ")");
    EXPECT_EQ(e.exit_code(), 2);
  }
  EXPECT_TRUE(host.libraries().empty());
  EXPECT_TRUE(host.all().empty());
}

TEST(PluginHost, RejectsDuplicateNamesNamingBothFiles) {
  runner::PluginHost host;
  host.load(plugin_file("good"));
  EXPECT_THROW_MSG(host.load(plugin_file("duplicate")), runner::Error,
                   "model plugin 'tiny_linear' is registered twice: by '" +
                       plugin_file("good").string() + "' and by '" +
                       plugin_file("duplicate").string() + "'");
  // The first registration survives untouched.
  EXPECT_EQ(host.find(runner::PluginKind::model, "tiny_linear")->help,
            "one linear layer (test plugin)");
}

TEST(PluginHost, FactoryExceptionNamesPluginAndLibrary) {
  runner::PluginHost host;
  host.load(plugin_file("throwing"));
  runner::ModelContext ctx;
  try {
    (void)host.make_model("explodes", runner::Options{}, ctx);
    FAIL() << "expected the factory to throw";
  } catch (const runner::Error& e) {
    EXPECT_EQ(std::string(e.what()), "model plugin 'explodes' (" +
                                         plugin_file("throwing").string() +
                                         ") failed: factory failed on purpose");
    EXPECT_EQ(e.exit_code(), 1);
  }
}

TEST(PluginHost, MissingPathAndNonPluginFileAreClearErrors) {
  runner::PluginHost host;
  EXPECT_THROW_MSG(host.load("/nonexistent/plugins"), runner::Error,
                   "plugin path '/nonexistent/plugins' does not exist");
  // A real shared library that is not a plugin: libc's math library.
  const fs::path libm = "/lib/x86_64-linux-gnu/libm.so.6";
  if (fs::exists(libm)) {
    EXPECT_THROW_MSG(host.load(libm), runner::Error,
                     "'" + fs::canonical(libm).string() +
                         "' is not a runner plugin: it does not export runner_plugin_abi and "
                         "runner_plugin_register");
  }
}

TEST(PluginHost, BuildsWorkingInstances) {
  runner::PluginHost host;
  host.load(kBuiltins);
  runner::Options data_options({{"shape", std::vector<std::int64_t>{8}},
                                {"classes", std::int64_t{3}},
                                {"size", std::int64_t{32}},
                                {"label_noise", 0.0},
                                {"data_seed", std::int64_t{0}}});
  auto loader = host.make_loader("synthetic", data_options, runner::LoaderContext{});
  ASSERT_EQ(loader->size(), 32);
  EXPECT_EQ(loader->spec().input_shape, std::vector<std::int64_t>{8});
  const runner::Batch batch = loader->get_batch({0, 5, 7});
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{3, 8}));
  EXPECT_EQ(batch.size, 3);
  // get_batch and get agree: the batch path is only a faster gather.
  EXPECT_TRUE(batch.inputs[1].equal(loader->get(5).input));
}

TEST(PluginKinds, EveryKindHasAName) {
  EXPECT_STREQ(runner::to_string(runner::PluginKind::comm_hook), "comm_hook");
  EXPECT_STREQ(runner::to_string(runner::PluginKind::kernel), "kernel");
  EXPECT_TRUE(runner::is_plugin_file_name("runner_plugin_mlp.so"));
  EXPECT_FALSE(runner::is_plugin_file_name("libtorch.so"));
  EXPECT_FALSE(runner::is_plugin_file_name("runner_plugin_mlp.so.bak"));
}

}  // namespace
