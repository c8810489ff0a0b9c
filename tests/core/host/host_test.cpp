// The plugin host against real shared libraries built by the suite.
#include "runner/host/host.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/stat.h>
#include <torch/optim/adamw.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <runner/sdk.hpp>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kTestPlugins = fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins";
const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";
const fs::path kExamples = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "examples";

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

// The error loading `path` raises (an empty one, and a test failure, if none).
runner::Error load_error(const fs::path& path) {
  runner::PluginHost host;
  try {
    host.load(path);
  } catch (const runner::Error& e) {
    EXPECT_TRUE(host.libraries().empty());
    EXPECT_TRUE(host.all().empty());
    return e;
  }
  ADD_FAILURE() << "expected loading " << path << " to fail";
  return runner::Error("");
}

// A scratch folder per test.
class HostFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("runner_host_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  // A copy of the good test plugin's bytes, changed by `edit`, as a plugin file.
  template <typename Edit>
  fs::path edited_copy(Edit edit) {
    std::ifstream in(plugin_file("good"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    edit(bytes);
    const fs::path out = dir_ / "runner_plugin_edited.so";
    std::ofstream(out, std::ios::binary) << bytes;
    return fs::canonical(out);
  }
  fs::path dir_;
};

// Sets RUNNER_TEST_REGISTRATION (what the throwing test plugin's registration does).
class RegistrationMode {
 public:
  explicit RegistrationMode(const char* mode) { ::setenv("RUNNER_TEST_REGISTRATION", mode, 1); }
  ~RegistrationMode() { ::unsetenv("RUNNER_TEST_REGISTRATION"); }
  RegistrationMode(const RegistrationMode&) = delete;
  RegistrationMode& operator=(const RegistrationMode&) = delete;
};

TEST(PluginHost, LoadsBuiltinsFromFolderAndListsThemSorted) {
  runner::PluginHost host;
  host.load(kBuiltins);
  EXPECT_EQ(host.names(runner::PluginKind::model),
            (std::vector<std::string>{"aoti", "convnet", "mlp", "resnet", "torchscript",
                                      "transformer_lm", "vit"}));
  EXPECT_EQ(host.names(runner::PluginKind::optimizer),
            (std::vector<std::string>{"adagrad", "adam", "adamw", "lion", "rmsprop", "sgd"}));
  EXPECT_EQ(host.names(runner::PluginKind::loader),
            (std::vector<std::string>{"cifar", "image_folder", "mnist", "npy", "synthetic",
                                      "synthetic_tokens", "tokens"}));
  EXPECT_EQ(host.names(runner::PluginKind::comm_hook),
            (std::vector<std::string>{"allreduce", "bf16_compress", "fp16_compress", "powersgd"}));
  EXPECT_EQ(host.names(runner::PluginKind::kernel),
            (std::vector<std::string>{"bias_gelu", "layernorm", "rmsnorm", "scale", "softmax"}));
  ASSERT_EQ(host.libraries().size(), 23u);
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
  const fs::path file = plugin_file("bad_abi");
  const runner::Error e = load_error(file);
  EXPECT_EQ(std::string(e.what()), "plugin library '" + file.string() +
                                       "' does not match this runner: SDK ABI version: expected " +
                                       std::to_string(RUNNER_SDK_ABI_VERSION) + ", found 999");
  EXPECT_EQ(e.hint(), "rebuild the plugin against this runner's SDK (" + abi_summary() + ")");
  EXPECT_EQ(e.exit_code(), 2);
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

// --- registration errors: the library registers nothing --------------------------

TEST(PluginHost, AnExceptionDuringRegistrationRegistersNothing) {
  const RegistrationMode mode("throw");
  const fs::path file = plugin_file("throwing");
  EXPECT_EQ(std::string(load_error(file).what()),
            "plugin library '" + file.string() +
                "' failed to register: registration failed on purpose");
}

TEST(PluginHost, AnEmptyPluginNameIsRefused) {
  const RegistrationMode mode("empty_name");
  const fs::path file = plugin_file("throwing");
  EXPECT_EQ(std::string(load_error(file).what()),
            "plugin library '" + file.string() + "' registers a model plugin with an empty name");
}

TEST(PluginHost, ALibraryRegisteringOneNameTwiceIsRefused) {
  const RegistrationMode mode("twice");
  const fs::path file = plugin_file("throwing");
  EXPECT_EQ(std::string(load_error(file).what()),
            "model plugin 'twice' is registered twice by '" + file.string() + "'");
}

TEST(PluginHost, KernelPluginsAreRegisteredAndTheirFunctionsNameThePlugin) {
  const RegistrationMode mode("kernel");
  const fs::path file = plugin_file("throwing");
  runner::PluginHost host;
  host.load(file);
  const runner::PluginDescriptor* kernel = host.find(runner::PluginKind::kernel, "fused_op");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->help, "a kernel whose reference throws (test plugin)");
  const runner::KernelCase made = host.make_kernel("fused_op", runner::Options{});
  EXPECT_FALSE(made.custom);  // what the plugin left empty stays empty
  try {
    (void)made.reference({});
    FAIL() << "the reference did not throw";
  } catch (const runner::Error& e) {
    EXPECT_EQ(std::string(e.what()), "kernel plugin 'fused_op' (" + kernel->library +
                                         ") failed in reference: reference failed on purpose");
    EXPECT_EQ(e.kind(), runner::ErrorKind::run);
  }
}

// --- errors from plugin code name the plugin and its library ----------------------

TEST(PluginHost, FactoryExceptionNamesPluginAndLibrary) {
  runner::PluginHost host;
  host.load(plugin_file("throwing"));
  try {
    (void)host.make_model("explodes", runner::Options{}, runner::ModelContext{});
    FAIL() << "expected the factory to throw";
  } catch (const runner::Error& e) {
    EXPECT_EQ(std::string(e.what()), "model plugin 'explodes' (" +
                                         plugin_file("throwing").string() +
                                         ") failed: factory failed on purpose");
    EXPECT_EQ(e.exit_code(), 1);
  }
}

TEST(PluginHost, AFactoryReturningNothingIsAnError) {
  runner::PluginHost host;
  host.load(plugin_file("throwing"));
  EXPECT_THROW_MSG((void)host.make_model("nothing", runner::Options{}, runner::ModelContext{}),
                   runner::Error,
                   "model plugin 'nothing' (" + plugin_file("throwing").string() +
                       ") returned nothing");
}

runner::Options tiny_linear_options(std::int64_t throw_at) {
  return runner::Options({{"throw_at_step", throw_at},
                          {"nan_at_step", std::int64_t{-1}},
                          {"crash_at_step", std::int64_t{-1}},
                          {"hang_at_step", std::int64_t{-1}},
                          {"kill_at_step", std::int64_t{-1}},
                          {"hang_in_factory", false},
                          {"fail_rank", std::int64_t{-1}},
                          {"delay_us", 0.0}});
}

TEST(PluginHost, ExceptionsFromAnInstanceNameThePluginAndItsLibrary) {
  runner::PluginHost host;
  host.load(plugin_file("good"));
  runner::ModelContext context;
  context.input_shape = {4};
  context.num_classes = 2;
  auto model = host.make_model("tiny_linear", tiny_linear_options(0), context);
  runner::Batch batch{torch::ones({2, 4}), torch::zeros({2}, torch::kLong), 2};
  const std::string prefix = "model plugin 'tiny_linear' (" + plugin_file("good").string() + ")";
  try {
    (void)model->forward(batch);
    FAIL() << "expected forward to throw";
  } catch (const runner::Error& e) {
    EXPECT_EQ(std::string(e.what()), prefix + " failed in forward: forward failed on purpose");
    EXPECT_EQ(e.exit_code(), 1);
  }
  // A TORCH_CHECK inside the plugin: LibTorch's message, without its C++ backtrace.
  batch.inputs = torch::ones({2, 3});
  try {
    (void)model->forward(batch);
    FAIL() << "expected forward to throw";
  } catch (const runner::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.substr(0, prefix.size() + 20), prefix + " failed in forward: ") << what;
    EXPECT_EQ(what.find("Exception raised from"), std::string::npos) << what;
  }
}

TEST(PluginHost, ExceptionsFromALoaderNameThePlugin) {
  runner::PluginHost host;
  host.load(kBuiltins);
  const auto loader = host.make_loader(
      "synthetic",
      runner::Options({{"shape", std::vector<std::int64_t>{2}}, {"size", std::int64_t{8}}}),
      runner::LoaderContext{});
  const std::string library = host.library_of(runner::PluginKind::loader, "synthetic").path;
  const std::string prefix = "loader plugin 'synthetic' (" + library + ") failed in get: ";
  try {
    (void)loader->get(100);
    FAIL() << "expected get to throw";
  } catch (const runner::Error& e) {
    EXPECT_EQ(std::string(e.what()).substr(0, prefix.size()), prefix) << e.what();
  }
}

TEST(PluginHost, CallPluginReportsAnyExceptionWithThePluginsName) {
  runner::PluginDescriptor plugin;
  plugin.kind = runner::PluginKind::optimizer;
  plugin.name = "fast";
  plugin.library = "/x/runner_plugin_fast.so";
  EXPECT_THROW_MSG(runner::call_plugin(plugin, "step",
                                       [] { throw std::invalid_argument("bad state"); }),
                   runner::Error,
                   "optimizer plugin 'fast' (/x/runner_plugin_fast.so) failed in step: bad state");
  EXPECT_THROW_MSG(runner::call_plugin(plugin, "step", [] { throw 42; }), runner::Error,
                   "optimizer plugin 'fast' (/x/runner_plugin_fast.so) failed in step: an "
                   "exception that is not a std::exception");
  EXPECT_EQ(runner::call_plugin(plugin, "step", [] { return 7; }), 7);
}

// --- the ABI record is read from the file, before anything of it runs -----------

TEST(PluginHost, ANonPluginSharedLibraryIsNeverLoaded) {
  // Whichever libm this process uses (wherever the system keeps it).
  Dl_info info{};
  const void* cos_address = ::dlsym(RTLD_DEFAULT, "cos");
  ASSERT_NE(cos_address, nullptr);
  ASSERT_NE(::dladdr(cos_address, &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  const fs::path libm = fs::canonical(info.dli_fname);
  EXPECT_EQ(std::string(load_error(libm).what()),
            "'" + libm.string() +
                "' is not a runner plugin: it has no ABI record (no .runner_plugin_abi section)");
}

class RecordCheck : public HostFiles {
 protected:
  void SetUp() override {
    HostFiles::SetUp();
    marker_ = dir_ / "loaded";
    ::setenv("RUNNER_TEST_MARKER", marker_.c_str(), 1);
  }
  void TearDown() override {
    // Every record test library writes the marker from its constructor: it must never run.
    EXPECT_FALSE(fs::exists(marker_)) << "a refused library was loaded";
    ::unsetenv("RUNNER_TEST_MARKER");
    HostFiles::TearDown();
  }
  static fs::path record_file(const std::string& name) {
    return fs::canonical(kTestPlugins / ("record_" + name) /
                         ("runner_plugin_test_record_" + name + ".so"));
  }
  static std::string error_for(const std::string& name) {
    return load_error(record_file(name)).what();
  }
  fs::path marker_;
};

TEST_F(RecordCheck, ALibraryWithoutRecordIsNotAPluginAndNeverRuns) {
  const fs::path file = record_file("none");
  const runner::Error e = load_error(file);
  EXPECT_EQ(std::string(e.what()),
            "'" + file.string() +
                "' is not a runner plugin: it has no ABI record (no .runner_plugin_abi section)");
  EXPECT_EQ(e.hint(),
            "a runner plugin is a shared library whose entry point is declared with "
            "RUNNER_PLUGIN(register_fn) from runner's SDK");
  // A folder scan refuses it the same way.
  EXPECT_EQ(std::string(load_error(file.parent_path()).what()), std::string(e.what()));
}

TEST_F(RecordCheck, APluginOfAnOlderSdkGetsTheVersionMismatch) {
  const fs::path file = record_file("old_sdk");
  EXPECT_EQ(error_for("old_sdk"),
            "plugin library '" + file.string() +
                "' does not match this runner: SDK ABI version: expected " +
                std::to_string(RUNNER_SDK_ABI_VERSION) + ", found " +
                std::to_string(RUNNER_SDK_ABI_VERSION - 1) + " or older (no ABI record)");
}

TEST_F(RecordCheck, AnotherLibTorchIsReportedInsteadOfAnUndefinedSymbol) {
  const fs::path file = record_file("other_torch");
  // The premise: loading this library fails, as a plugin built against
  // another LibTorch does, with an undefined symbol.
  ASSERT_EQ(::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL), nullptr);
  const std::string dl_error = ::dlerror();
  EXPECT_NE(dl_error.find("undefined symbol"), std::string::npos) << dl_error;
  EXPECT_EQ(error_for("other_torch"),
            "plugin library '" + file.string() +
                "' does not match this runner: LibTorch version: expected " +
                runner::host_abi().torch_version + ", found 1.0.0");
}

TEST_F(RecordCheck, MalformedRecordsAreRefused) {
  auto malformed = [](const std::string& name, const std::string& why) {
    return "plugin library '" + record_file(name).string() + "' has a malformed ABI record: " + why;
  };
  EXPECT_EQ(error_for("unterminated"), malformed("unterminated", "torch_version is not NUL-terminated"));
  EXPECT_EQ(error_for("nonprintable"),
            malformed("nonprintable", "compiler holds a non-printable character (0x01)"));
  EXPECT_EQ(error_for("truncated"),
            malformed("truncated", "the .runner_plugin_abi section holds 12 bytes, fewer than "
                                   "the 24-byte record header"));
  EXPECT_EQ(error_for("bad_magic"),
            malformed("bad_magic", "it does not start with \"runner-plugin\""));
  EXPECT_EQ(load_error(record_file("unterminated")).hint(),
            "rebuild the plugin with RUNNER_PLUGIN from this runner's SDK (" + abi_summary() +
                ")");
}

TEST_F(RecordCheck, ARecordOfAnotherSizeIsAMismatch) {
  EXPECT_EQ(error_for("wrong_size"),
            "plugin library '" + record_file("wrong_size").string() +
                "' does not match this runner: ABI record size: expected " +
                std::to_string(sizeof(runner::PluginAbiRecord)) + ", found " +
                std::to_string(sizeof(runner::PluginAbiRecord) + 8));
}

TEST_F(RecordCheck, AMatchingRecordWithoutEntryPointIsRefusedAfterLoading) {
  const fs::path file = record_file("no_register");
  EXPECT_EQ(error_for("no_register"),
            "plugin library '" + file.string() +
                "' has an ABI record but does not export runner_plugin_register");
}

TEST_F(HostFiles, FilesThatAreNotElfSharedLibrariesAreRefusedUnread) {
  const fs::path text = dir_ / "runner_plugin_text.so";
  std::ofstream(text) << "not a library\n";
  EXPECT_EQ(std::string(load_error(text).what()),
            "'" + text.string() + "' is not a runner plugin: it is not an ELF file");
  // A folder scan reads the same files.
  EXPECT_EQ(std::string(load_error(dir_).what()), std::string(load_error(text).what()));

  const fs::path fifo = dir_ / "runner_plugin_fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(std::string(load_error(fifo).what()),
            "'" + fifo.string() + "' is not a runner plugin: it is not a regular file");
}

TEST_F(HostFiles, TruncatedAndDamagedElfFilesAreRefusedWithoutReadingOutsideThem) {
  // Section headers sit at the end of the file: every truncation loses them.
  for (const std::size_t keep : {std::size_t{70}, std::size_t{4096}, std::size_t{20000}}) {
    const fs::path file = edited_copy([&](std::string& bytes) { bytes.resize(keep); });
    EXPECT_EQ(std::string(load_error(file).what()),
              "'" + file.string() + "' is not a valid ELF file: its section headers lie outside "
                                    "the file")
        << keep;
  }
  const fs::path far = edited_copy([](std::string& bytes) {
    auto* header = reinterpret_cast<Elf64_Ehdr*>(bytes.data());
    header->e_shoff = ~std::uint64_t{0} - 8;  // an offset that overflows when added to
  });
  EXPECT_EQ(std::string(load_error(far).what()),
            "'" + far.string() + "' is not a valid ELF file: its section headers lie outside the file");
  const fs::path names = edited_copy([](std::string& bytes) {
    reinterpret_cast<Elf64_Ehdr*>(bytes.data())->e_shstrndx = 0xfff0;
  });
  EXPECT_EQ(std::string(load_error(names).what()),
            "'" + names.string() +
                "' is not a valid ELF file: its section name table index is out of range");
#if defined(__x86_64__)
  const fs::path other = edited_copy([](std::string& bytes) {
    reinterpret_cast<Elf64_Ehdr*>(bytes.data())->e_machine = EM_AARCH64;
  });
  EXPECT_EQ(std::string(load_error(other).what()),
            "'" + other.string() +
                "' is not a runner plugin: it was built for another machine (ELF machine 183, "
                "this runner is 62)");
#endif
}

TEST(PluginHost, MissingPathIsAClearError) {
  runner::PluginHost host;
  EXPECT_THROW_MSG(host.load("/nonexistent/plugins"), runner::Error,
                   "plugin path '/nonexistent/plugins' does not exist");
}

// --- instances ----------------------------------------------------------------------

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

runner::ModelContext image_context() {
  runner::ModelContext context;
  context.input_shape = {3, 8, 8};
  context.num_classes = 4;
  return context;
}

TEST(ClassificationModel, ConvNetChecksItsDataAndMakesExampleBatches) {
  runner::PluginHost host;
  host.load(kBuiltins);
  const std::string library = host.library_of(runner::PluginKind::model, "convnet").path;
  runner::ModelContext flat;
  flat.input_shape = {32};
  flat.num_classes = 4;
  EXPECT_THROW_MSG((void)host.make_model("convnet", runner::Options{}, flat), runner::Error,
                   "model plugin 'convnet' (" + library +
                       ") failed: needs image samples [channels, height, width] of at least "
                       "4x4; set the loader's shape, e.g. shape = [3, 32, 32]");
  EXPECT_THROW_MSG((void)host.make_model("convnet", runner::Options{}, runner::ModelContext{}),
                   runner::Error,
                   "model plugin 'convnet' (" + library +
                       ") failed: a classification model needs the sample shape from the "
                       "loader; add a [data] section whose loader declares its input shape");
  runner::ModelContext one_class = image_context();
  one_class.num_classes = 1;
  EXPECT_THROW_MSG((void)host.make_model("convnet", runner::Options{}, one_class), runner::Error,
                   "model plugin 'convnet' (" + library +
                       ") failed: a classification model needs a loader with at least 2 "
                       "classes; the loader declares 1");

  auto model = host.make_model("convnet", runner::Options{}, image_context());
  const runner::Batch batch = model->example_batch(5, torch::kCPU);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{5, 3, 8, 8}));
  EXPECT_EQ(batch.targets.sizes(), (std::vector<std::int64_t>{5}));
  EXPECT_GE(batch.targets.min().item<std::int64_t>(), 0);
  EXPECT_LT(batch.targets.max().item<std::int64_t>(), 4);
  const torch::Tensor logits = model->forward(batch);
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{5, 4}));
  // Cross-entropy of the logits: what LibTorch computes from them.
  EXPECT_TRUE(model->loss(logits, batch).allclose(
      torch::nn::functional::cross_entropy(logits, batch.targets)));
  // Defaults channels = [32, 64]: 3x3 convolutions without bias (batch norm follows).
  const double expected_flops =
      2.0 * (3 * 9 * 32 * 8 * 8 + 32 * 9 * 64 * 4 * 4 + 64 * 2 * 2 * 4);
  EXPECT_EQ(model->flops_per_sample(), expected_flops);
  EXPECT_EQ(model->parameter_count(),
            3 * 9 * 32 + 2 * 32 + 32 * 9 * 64 + 2 * 64 + 64 * 2 * 2 * 4 + 4);
}

TEST(ClassificationModel, EvaluationTalliesLossAndTop1AccuracyPerSample) {
  runner::PluginHost host;
  host.load(kBuiltins);
  auto model = host.make_model("convnet", runner::Options{}, image_context());
  runner::Batch batch = model->example_batch(4, torch::kCPU);
  // Logits whose argmax is the target for samples 0 and 2 only.
  torch::Tensor logits = torch::zeros({4, 4});
  const auto targets = batch.targets;
  for (std::int64_t i = 0; i < 4; ++i) {
    const std::int64_t t = targets[i].item<std::int64_t>();
    logits[i][(i % 2 == 0) ? t : (t + 1) % 4] = 5.0;
  }
  const runner::EvalTally tally = model->evaluate(logits, batch);
  EXPECT_EQ(tally.count, 4.0);
  EXPECT_EQ(tally.sums.size(), 2u);
  EXPECT_EQ(tally.sums.at("accuracy"), 2.0);
  // The loss sum is the mean cross-entropy times the samples, so that the
  // host's sum / count over many batches is the per-sample mean.
  EXPECT_NEAR(tally.sums.at("loss"),
              4.0 * torch::nn::functional::cross_entropy(logits, targets).item<double>(), 1e-9);
  EXPECT_TRUE(model->finish_evaluation({{"loss", 1.0}}).empty());
}

TEST(OptimizerContext, NamesEveryTrainableParameterWithItsModuleType) {
  runner::PluginHost host;
  host.load(kBuiltins);
  auto model = host.make_model("convnet", runner::Options{}, image_context());
  const runner::OptimizerContext context = runner::make_optimizer_context(model->module(), 12);
  EXPECT_EQ(context.module, &model->module());
  EXPECT_EQ(context.total_steps, 12);
  std::vector<std::string> names, types;
  for (const auto& p : context.named_parameters) {
    names.push_back(p.name);
    types.push_back(p.module_type);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"features.0.weight", "features.1.weight",
                                             "features.1.bias", "features.4.weight",
                                             "features.5.weight", "features.5.bias",
                                             "head.0.weight", "head.0.bias"}));
  EXPECT_EQ(types, (std::vector<std::string>{
                       "torch::nn::Conv2dImpl", "torch::nn::BatchNorm2dImpl",
                       "torch::nn::BatchNorm2dImpl", "torch::nn::Conv2dImpl",
                       "torch::nn::BatchNorm2dImpl", "torch::nn::BatchNorm2dImpl",
                       "torch::nn::LinearImpl", "torch::nn::LinearImpl"}));
  ASSERT_EQ(context.parameters.size(), context.named_parameters.size());
  for (std::size_t i = 0; i < context.parameters.size(); ++i)
    EXPECT_TRUE(context.parameters[i].is_same(context.named_parameters[i].tensor)) << i;

  // "bias" by name, "norm" by module type (the BatchNorm weights have no "norm" in their name).
  const runner::ParameterSplit split = runner::split_parameters(context.named_parameters,
                                                                {"bias", "norm"});
  auto same = [](const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!got[i].is_same(want[i])) return false;
    return true;
  };
  const auto& p = context.parameters;
  EXPECT_TRUE(same(split.decay, {p[0], p[3], p[6]}));
  EXPECT_TRUE(same(split.no_decay, {p[1], p[2], p[4], p[5], p[7]}));
  EXPECT_EQ(runner::split_parameters(context.named_parameters, {}).decay.size(), 8u);
}

TEST(OptimizerContext, TheGroupedAdamWExampleKeepsBiasesAndNormsOutOfWeightDecay) {
  runner::PluginHost host;
  host.load(kBuiltins);
  host.load(kExamples);
  auto model = host.make_model("convnet", runner::Options{}, image_context());
  const runner::Options options({{"lr", 0.002},
                                 {"betas", std::vector<double>{0.8, 0.99}},
                                 {"eps", 1e-6},
                                 {"weight_decay", 0.1},
                                 {"no_decay", std::vector<std::string>{"bias", "norm"}}});
  auto optimizer = host.make_optimizer("grouped_adamw", options,
                                       runner::make_optimizer_context(model->module(), 10));
  const auto& groups = optimizer->get().param_groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params().size(), 3u);
  EXPECT_EQ(groups[1].params().size(), 5u);
  const auto& decay = static_cast<const torch::optim::AdamWOptions&>(groups[0].options());
  const auto& none = static_cast<const torch::optim::AdamWOptions&>(groups[1].options());
  EXPECT_DOUBLE_EQ(decay.weight_decay(), 0.1);
  EXPECT_DOUBLE_EQ(none.weight_decay(), 0.0);
  for (const auto* group : {&decay, &none}) {
    EXPECT_DOUBLE_EQ(group->lr(), 0.002);
    EXPECT_DOUBLE_EQ(std::get<0>(group->betas()), 0.8);
    EXPECT_DOUBLE_EQ(std::get<1>(group->betas()), 0.99);
    EXPECT_DOUBLE_EQ(group->eps(), 1e-6);
  }
  // Its declaration: lr is required, betas exactly two numbers, no_decay at most eight strings.
  const runner::PluginDescriptor* d = host.find(runner::PluginKind::optimizer, "grouped_adamw");
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->schema.find("lr")->default_value.has_value());
  EXPECT_EQ(d->schema.find("betas")->min_items, 2u);
  EXPECT_EQ(d->schema.find("betas")->max_items, std::optional<std::size_t>(2));
  EXPECT_EQ(d->schema.find("no_decay")->type, runner::OptionType::string_list);
  EXPECT_EQ(d->schema.find("no_decay")->max_items, std::optional<std::size_t>(8));
}

TEST(PluginKinds, EveryKindHasAName) {
  EXPECT_STREQ(runner::to_string(runner::PluginKind::comm_hook), "comm_hook");
  EXPECT_STREQ(runner::to_string(runner::PluginKind::kernel), "kernel");
  EXPECT_TRUE(runner::is_plugin_file_name("runner_plugin_mlp.so"));
  EXPECT_FALSE(runner::is_plugin_file_name("libtorch.so"));
  EXPECT_FALSE(runner::is_plugin_file_name("runner_plugin_mlp.so.bak"));
}

// --- who could have written a library ------------------------------------------

class TrustCheck : public HostFiles {
 protected:
  // A copy of the good test plugin in this test's folder (mode 0755, ours).
  fs::path copy_of_good() {
    const fs::path file = dir_ / "runner_plugin_test_good.so";
    fs::copy_file(plugin_file("good"), file);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    return fs::canonical(file);
  }
  static std::string hint(const std::string& what) {
    return what + "or pass --allow-unsafe-plugins (RUNNER_ALLOW_UNSAFE_PLUGINS=1) to load it anyway";
  }
};

TEST_F(TrustCheck, AWorldWritableLibraryIsRefusedUnlessAllowed) {
  const fs::path file = copy_of_good();
  fs::permissions(file, fs::perms::others_write, fs::perm_options::add);
  const runner::Error e = load_error(file);
  EXPECT_EQ(std::string(e.what()), "plugin library '" + file.string() +
                                       "' is writable by every user (mode 0757): anyone could "
                                       "replace it with their own code");
  EXPECT_EQ(e.hint(), hint("remove the write permission (chmod o-w), "));
  runner::PluginHost host;
  host.allow_unsafe_paths(true);
  host.load(file);
  EXPECT_EQ(host.names(runner::PluginKind::model), std::vector<std::string>{"tiny_linear"});
}

TEST_F(TrustCheck, ALibraryOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  const fs::path file = copy_of_good();
  ASSERT_EQ(::chown(file.c_str(), 4242, 4242), 0);
  EXPECT_EQ(std::string(load_error(file).what()),
            "plugin library '" + file.string() + "' is owned by user 4242, not by you or root");
}

TEST_F(TrustCheck, AFolderOthersCanWriteToIsRefusedForScansAndForItsFiles) {
  const fs::path file = copy_of_good();
  fs::permissions(dir_, fs::perms::others_write, fs::perm_options::add);
  EXPECT_EQ(std::string(load_error(dir_).what()),
            "plugin folder '" + fs::canonical(dir_).string() +
                "' is writable by every user (mode 0757): anyone could add a library to it");
  EXPECT_EQ(std::string(load_error(file).what()),
            "plugin library '" + file.string() + "' is in a folder every user can write to (" +
                fs::canonical(dir_).string() +
                ", mode 0757): anyone could replace it with their own code");
  // The sticky bit (as on /tmp) keeps others from replacing a file they do
  // not own, so the file may load; the folder still may not be scanned.
  fs::permissions(dir_, fs::perms::sticky_bit, fs::perm_options::add);
  runner::PluginHost host;
  host.load(file);
  EXPECT_EQ(std::string(load_error(dir_).what()),
            "plugin folder '" + fs::canonical(dir_).string() +
                "' is writable by every user (mode 1757): anyone could add a library to it");
}

// A copy of the good plugin at dir_/outer/inner/, both folders 0755 and
// ours; each test then opens up `outer`, the folder above the library's.
class AncestorTrust : public TrustCheck {
 protected:
  void SetUp() override {
    TrustCheck::SetUp();
    outer_ = dir_ / "outer";
    inner_ = outer_ / "inner";
    fs::create_directories(inner_);
    for (const fs::path& folder : {outer_, inner_}) fs::permissions(folder, kRwxrxrx);
    file_ = inner_ / "runner_plugin_test_good.so";
    fs::copy_file(plugin_file("good"), file_);
    outer_ = fs::canonical(outer_);
    inner_ = fs::canonical(inner_);
    file_ = fs::canonical(file_);
  }
  static constexpr fs::perms kRwxrxrx = fs::perms::owner_all | fs::perms::group_read |
                                        fs::perms::group_exec | fs::perms::others_read |
                                        fs::perms::others_exec;
  fs::path outer_, inner_, file_;
};

TEST_F(AncestorTrust, ALibraryAnywhereBelowAWorldWritableFolderIsRefused) {
  fs::permissions(outer_, fs::perms::all);  // 0777, not sticky
  const runner::Error e = load_error(file_);
  EXPECT_EQ(std::string(e.what()),
            "plugin library '" + file_.string() + "' is inside " + outer_.string() +
                ", which every user can write to (mode 0777): they could rename what is below "
                "it and put their own code in its place");
  EXPECT_EQ(e.hint(), hint("remove the write permission (chmod o-w " + outer_.string() +
                           ") or set the sticky bit (chmod +t " + outer_.string() +
                           "), or move it elsewhere, "));
  EXPECT_EQ(std::string(load_error(inner_).what()),
            "plugin folder '" + inner_.string() + "' is inside " + outer_.string() +
                ", which every user can write to (mode 0777): they could rename what is below "
                "it and put their own code in its place");
  runner::PluginHost host;
  host.allow_unsafe_paths(true);
  host.load(file_);
  EXPECT_EQ(host.names(runner::PluginKind::model), std::vector<std::string>{"tiny_linear"});
}

TEST_F(AncestorTrust, AStickyWorldWritableFolderOfRootsOrOursAboveItIsAccepted) {
  fs::permissions(outer_, fs::perms::all | fs::perms::sticky_bit);  // 1777, like /tmp
  runner::PluginHost host;
  host.load(file_);
  host.load(inner_);
  EXPECT_EQ(host.names(runner::PluginKind::model), std::vector<std::string>{"tiny_linear"});
}

TEST_F(AncestorTrust, AStickyFolderAboveItOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a folder's owner needs root";
  fs::permissions(outer_, fs::perms::all | fs::perms::sticky_bit);
  ASSERT_EQ(::chown(outer_.c_str(), 4242, 4242), 0);
  const runner::Error e = load_error(file_);
  EXPECT_EQ(std::string(e.what()),
            "plugin library '" + file_.string() + "' is inside " + outer_.string() +
                ", which is owned by user 4242, not by you or root: that user could put their "
                "own code in its place");
  EXPECT_EQ(e.hint(), hint("move it under folders only you or root own, "));
}

TEST_F(AncestorTrust, AFolderAboveItWritableByAGroupOfOtherUsersIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing a folder's group needs root";
  fs::permissions(outer_, fs::perms::group_write, fs::perm_options::add);  // 0775
  ASSERT_EQ(::chown(outer_.c_str(), ::geteuid(), 0), 0);
  {  // root's group holds administrators only
    runner::PluginHost host;
    host.load(file_);
  }
  ASSERT_EQ(::chown(outer_.c_str(), ::geteuid(), 4242), 0);
  const std::string group = ::getgrgid(4242) != nullptr ? ::getgrgid(4242)->gr_name : "4242";
  const runner::Error e = load_error(file_);
  EXPECT_EQ(std::string(e.what()),
            "plugin library '" + file_.string() + "' is inside " + outer_.string() +
                ", which the users of group '" + group +
                "' can write to (mode 0775): they could rename what is below it and put their "
                "own code in its place");
  EXPECT_EQ(e.hint(), hint("remove the write permission (chmod g-w " + outer_.string() +
                           ") or set the sticky bit (chmod +t " + outer_.string() +
                           "), or move it elsewhere, "));
}

}  // namespace

