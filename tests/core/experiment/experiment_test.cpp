// Tests of the experiment layer: TOML file -> validated runner::Experiment,
// with the exact messages users see, and the canonical JSON that identifies a trial.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "experiment_fixture.hpp"
#include "runner/runtime/runtime.hpp"
#include "runner/common/sha256.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;
using test::FakeCatalog;
using test::kData;
using test::kMinimal;
using test::kModel;
using test::kOptimizer;

class ExperimentTest : public test::ExperimentFixture {};

const char* const kKnownSections =
    "known sections: experiment, device, runtime, env, model, data, optimizer, train, schedule, infer, eval, profile, distributed, "
    "comm_hook, kernel, plugins, sweep, trial, expect";

// --- happy paths ---------------------------------------------------------------

TEST_F(ExperimentTest, HappyPathReadsEveryKeyAndFillsDefaults) {
  const std::string text =
      "# a comment\n"
      "[experiment]\n"
      "name = \"amp\"\n"
      "description = \"fp32 baseline\"\n"
      "kind = \"train\"\n"
      "seed = 7\n"
      "repeats = 3\n"
      "\n"
      "[device]\n"
      "type = \"auto\"\n"
      "threads = 4\n"
      "interop_threads = 2\n"
      "\n"
      "[model]\n"
      "plugin = \"mlp\"\n"
      "hidden = [128, 64]\n"
      "\n"
      "[data]\n"
      "plugin = \"synthetic\"\n"
      "batch_size = 16\n"
      "shuffle = false\n"
      "size = 100\n"
      "\n"
      "[optimizer]\n"
      "plugin = \"sgd\"\n"
      "lr = 0.5\n"
      "\n"
      "[train]\n"
      "steps = 20\n"
      "warmup = 0\n";
  const Experiment e = load(text);
  EXPECT_EQ(e.source->path, dir_ / "exp.toml");
  EXPECT_EQ(e.source->text, text);
  EXPECT_EQ(e.name, "amp");
  EXPECT_EQ(e.description, "fp32 baseline");
  EXPECT_EQ(e.kind, RunKind::train);
  EXPECT_EQ(e.seed, 7);
  EXPECT_EQ(e.repeats, 3);
  EXPECT_EQ(e.device.type, "auto");
  EXPECT_EQ(e.device.threads, 4);
  EXPECT_EQ(e.device.interop_threads, 2);

  EXPECT_EQ(e.model.plugin, "mlp");
  EXPECT_EQ(e.model.where.str(), file() + ":15:10");
  EXPECT_EQ(e.model.options.integers("hidden"), (std::vector<std::int64_t>{128, 64}));
  EXPECT_EQ(e.model.options.string("activation"), "relu");  // default
  EXPECT_EQ(e.model.options.number("dropout"), 0.0);        // default
  EXPECT_EQ(e.model.options.values().size(), 3u);

  ASSERT_TRUE(e.data.has_value());
  EXPECT_EQ(e.data->plugin, "synthetic");
  EXPECT_EQ(e.data->options.integer("size"), 100);
  EXPECT_EQ(e.data->options.integers("shape"), (std::vector<std::int64_t>{8}));
  // Host keys of [data] are not loader options.
  EXPECT_FALSE(e.data->options.has("batch_size"));
  EXPECT_FALSE(e.data->options.has("plugin"));
  EXPECT_EQ(e.data_settings.batch_size, 16);
  EXPECT_FALSE(e.data_settings.shuffle);
  EXPECT_TRUE(e.data_settings.drop_last);

  ASSERT_TRUE(e.optimizer.has_value());
  EXPECT_EQ(e.optimizer->plugin, "sgd");
  EXPECT_EQ(e.optimizer->options.number("lr"), 0.5);
  EXPECT_EQ(e.optimizer->options.number("momentum"), 0.0);

  EXPECT_EQ(e.train.steps, 20);
  EXPECT_EQ(e.train.warmup, 0);
  EXPECT_TRUE(e.plugin_paths.empty());
}

TEST_F(ExperimentTest, MinimalTrainExperimentGetsDocumentedDefaults) {
  const Experiment e = load(kMinimal, "quick-start.toml");
  EXPECT_EQ(e.name, "quick-start");  // the file stem
  EXPECT_EQ(e.description, "");
  EXPECT_EQ(e.kind, RunKind::train);
  EXPECT_EQ(e.seed, 0);
  EXPECT_EQ(e.repeats, 1);
  EXPECT_EQ(e.device.type, "cpu");
  EXPECT_EQ(e.device.threads, 0);
  EXPECT_EQ(e.device.interop_threads, 0);
  EXPECT_EQ(e.data_settings.batch_size, 32);
  EXPECT_TRUE(e.data_settings.shuffle);
  EXPECT_TRUE(e.data_settings.drop_last);
  EXPECT_EQ(e.train.steps, 100);
  EXPECT_EQ(e.train.warmup, 10);
  EXPECT_EQ(e.model.options.integers("hidden"), (std::vector<std::int64_t>{64}));
}

TEST_F(ExperimentTest, InferExperimentNeedsNeitherDataNorOptimizer) {
  const Experiment e = load(
      "[experiment]\nkind = \"infer\"\n" + kModel +
      "[infer]\nbatches = 5\nwarmup = 1\nmode = \"no_grad\"\n");
  EXPECT_EQ(e.kind, RunKind::infer);
  EXPECT_FALSE(e.data.has_value());
  EXPECT_FALSE(e.optimizer.has_value());
  EXPECT_EQ(e.infer.batches, 5);
  EXPECT_EQ(e.infer.warmup, 1);
  EXPECT_EQ(e.infer.mode, "no_grad");
}

TEST_F(ExperimentTest, InferExperimentMayUseALoader) {
  const Experiment e =
      load("[experiment]\nkind = \"infer\"\n" + kModel + kData + "batch_size = 4\n");
  ASSERT_TRUE(e.data.has_value());
  EXPECT_EQ(e.data_settings.batch_size, 4);
  EXPECT_EQ(e.infer.batches, 100);
  EXPECT_EQ(e.infer.warmup, 10);
  EXPECT_EQ(e.infer.mode, "inference");
}

TEST_F(ExperimentTest, InlineTablesAndDottedKeysWork) {
  const Experiment e = load(
      "model = { plugin = \"mlp\", activation = \"gelu\" }\n"
      "data.plugin = \"synthetic\"\n"
      "data.batch_size = 2\n" +
      kOptimizer);
  EXPECT_EQ(e.model.options.string("activation"), "gelu");
  EXPECT_EQ(e.data_settings.batch_size, 2);
}

// A copy of `file` in a temporary experiments/ folder beside a models/ folder
// holding a stand-in for every "../models/NAME" it names: phase 1 only needs
// the files to exist (their bytes join the identity). The exported models
// themselves take minutes to make; CompiledCliTest runs the real ones.
fs::path with_model_stand_ins(const fs::path& file, const fs::path& root) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();
  fs::create_directories(root / "experiments");
  fs::create_directories(root / "models");
  const std::regex named("\"\\.\\./models/([^\"]+)\"");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), named);
       it != std::sregex_iterator(); ++it)
    std::ofstream(root / "models" / (*it)[1].str()) << "stand-in for " << (*it)[1].str();
  fs::copy_file(file, root / "experiments" / file.filename(), fs::copy_options::overwrite_existing);
  return root / "experiments" / file.filename();
}

TEST(ShippedExperiments, PassTheHostLevelChecks) {
  // Phase 1 needs no plugins, so every ready-to-run example is checked here.
  std::size_t seen = 0;
  const fs::path root = fs::temp_directory_path() /
                        ("runner-shipped-" + std::to_string(static_cast<long>(::getpid())));
  for (const auto& entry : fs::directory_iterator(fs::path(RUNNER_SOURCE_DIR) / "experiments")) {
    if (entry.path().extension() != ".toml") continue;
    ++seen;
    // An AddressSanitizer build cannot preload an allocator: it refuses the
    // allocator comparison (and only that) at its key.
    const bool preloads = entry.path().filename() == "allocators.toml";
    try {
      const bool exported = entry.path().filename() == "eager_vs_compiled.toml";
      static_cast<void>(
          parse_experiment_file(exported ? with_model_stand_ins(entry.path(), root) : entry.path()));
      EXPECT_TRUE(!preloads || runner::allocator_preload_possible()) << entry.path();
    } catch (const Error& e) {
      if (preloads && !runner::allocator_preload_possible())
        EXPECT_NE(std::string(e.what()).find("cannot be preloaded into this runner: it is built "
                                             "with AddressSanitizer"),
                  std::string::npos)
            << e.what();
      else
        ADD_FAILURE() << e.what() << "\n  hint: " << e.hint();
    }
  }
  EXPECT_GT(seen, 0u);
  // Weights, references, TorchScript files and packages of 4 exports.
  EXPECT_EQ(std::distance(fs::directory_iterator(root / "models"), fs::directory_iterator()), 16);
  std::error_code ignored;
  fs::remove_all(root, ignored);
}

// --- reading the file ----------------------------------------------------------

TEST_F(ExperimentTest, MissingFile) {
  const fs::path path = dir_ / "nope.toml";
  try {
    static_cast<void>(parse_experiment_file(path));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open experiment file '" + path.string() + "': No such file or directory");
    EXPECT_EQ(e.hint(), "check the path; experiments/ holds ready-to-run examples");
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST_F(ExperimentTest, FolderInsteadOfFile) {
  EXPECT_THROW_MSG(static_cast<void>(parse_experiment_file(dir_)), Error,
                   "cannot open experiment file '" + dir_.string() + "': Is a directory");
}

TEST_F(ExperimentTest, InvalidToml) {
  const Error e = error_of("[model]\nplugin = \n");
  EXPECT_EQ(std::string(e.what()),
            at(2, 10) + "invalid TOML: Error while parsing key-value pair: expected value, saw "
                        "'\\n'");
  const Error dup = error_of("[model]\nplugin = \"mlp\"\n[model]\n");
  EXPECT_EQ(std::string(dup.what()),
            at(3, 1) + "invalid TOML: Error while parsing table header: cannot redefine "
                       "existing table 'model'");
}

TEST_F(ExperimentTest, ErrorsNameThePathAsGiven) {
  fs::create_directories(dir_ / "sub");
  const fs::path given = dir_ / "sub" / ".." / "." / "exp.toml";
  write("[modl]\n");
  EXPECT_THROW_MSG(static_cast<void>(parse_experiment_file(given)), Error,
                   given.string() + ":1:1: unknown section [modl]; did you mean [model]?");
}

TEST_F(ExperimentTest, FirstProblemInFileOrderIsReported) {
  // toml++ keeps keys sorted ("steps" < "warmup"); the reader must not.
  EXPECT_THROW_MSG(load("[train]\nwarmup = -1\nsteps = 0\n" + kMinimal), Error,
                   at(2, 10) + "'train.warmup' must be a step count between 0 and 1000000 or \"auto\", found -1");
  EXPECT_THROW_MSG(load("[zzzz]\n[aaaa]\n" + kMinimal), Error,
                   at(1, 1) + "unknown section [zzzz]");
}

// --- sections and host keys ------------------------------------------------------

TEST_F(ExperimentTest, UnknownSectionWithSuggestion) {
  const Error e = error_of("[modl]\nplugin = \"mlp\"\n");
  EXPECT_EQ(std::string(e.what()), at(1, 1) + "unknown section [modl]; did you mean [model]?");
  EXPECT_EQ(e.hint(), kKnownSections);
}

TEST_F(ExperimentTest, UnknownSectionWithoutSuggestion) {
  const Error e = error_of(kMinimal + "[telemetry]\nport = 2\n");
  EXPECT_EQ(std::string(e.what()), at(8, 1) + "unknown section [telemetry]");
  EXPECT_EQ(e.hint(), kKnownSections);
}

TEST_F(ExperimentTest, SectionWrittenAsAValue) {
  const Error e = error_of("model = \"mlp\"\n");
  EXPECT_EQ(std::string(e.what()), at(1, 9) + "'model' must be a table, found a string");
  EXPECT_EQ(e.hint(), "write it as a section: [model]");
}

TEST_F(ExperimentTest, KeyOutsideAnySection) {
  const Error e = error_of("steps = 5\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()), at(1, 1) + "key 'steps' is outside any section");
  EXPECT_EQ(e.hint(), std::string("put it under one of the sections; ") + kKnownSections);
}

TEST_F(ExperimentTest, UnknownHostKeyWithSuggestion) {
  const Error e = error_of("[train]\nstepz = 5\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()),
            at(2, 1) + "unknown key 'stepz' in [train]; did you mean 'steps'?");
  EXPECT_EQ(e.hint(), "keys of [train]: steps, warmup, precision, accumulate, clip_grad_norm, save_to");
}

TEST_F(ExperimentTest, UnknownHostKeyWithoutSuggestion) {
  const Error e = error_of("[device]\ngpus = 1\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()), at(2, 1) + "unknown key 'gpus' in [device]");
  EXPECT_EQ(e.hint(), "keys of [device]: type, threads, interop_threads, cudnn_benchmark, deterministic, tf32_matmul, tf32_conv, float32_matmul_precision");
  // A sub-table is a key of its section too.
  const Error sub = error_of("[experiment.extra]\na = 1\n" + kMinimal);
  EXPECT_EQ(std::string(sub.what()), at(1, 1) + "unknown key 'extra' in [experiment]");
  EXPECT_EQ(sub.hint(), "keys of [experiment]: name, description, kind, seed, repeats, min_repeats, max_repeats, time_budget, timeout, labels");
}

TEST_F(ExperimentTest, HostKeyOfWrongType) {
  const Error e = error_of("[train]\nsteps = \"ten\"\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()), at(2, 9) + "'train.steps' must be an integer, found a string");
  EXPECT_EQ(e.hint(), "");
  EXPECT_THROW_MSG(load("[train]\nsteps = 1.5\n" + kMinimal), Error,
                   at(2, 9) + "'train.steps' must be an integer, found a float");
  EXPECT_THROW_MSG(load(kData + "shuffle = \"yes\"\n" + kModel + kOptimizer), Error,
                   at(3, 11) + "'data.shuffle' must be a boolean, found a string");
  EXPECT_THROW_MSG(load("[experiment]\nseed = 1979-05-27\n" + kMinimal), Error,
                   at(2, 8) + "'experiment.seed' must be an integer, found a date");
  EXPECT_THROW_MSG(load("[experiment]\nname = [\"a\"]\n" + kMinimal), Error,
                   at(2, 8) + "'experiment.name' must be a string, found an array");
}

TEST_F(ExperimentTest, HostKeyOutOfRange) {
  EXPECT_THROW_MSG(load("[train]\nsteps = 0\n" + kMinimal), Error,
                   at(2, 9) + "'train.steps' must be between 1 and 1000000, found 0");
  EXPECT_THROW_MSG(load("[experiment]\nseed = -1\n" + kMinimal), Error,
                   at(2, 8) + "'experiment.seed' must be >= 0, found -1");
  EXPECT_THROW_MSG(load("[experiment]\nrepeats = 0\n" + kMinimal), Error,
                   at(2, 11) + "'experiment.repeats' must be between 1 and 10000, found 0");
  EXPECT_THROW_MSG(load("[device]\nthreads = -2\n" + kMinimal), Error,
                   at(2, 11) + "'device.threads' must be between 0 and 1024, found -2");
  EXPECT_THROW_MSG(load(kModel + kOptimizer + kData + "batch_size = 0\n"), Error,
                   at(8, 14) + "'data.batch_size' must be between 1 and 1048576, found 0");
}

TEST_F(ExperimentTest, HostKeyChoices) {
  EXPECT_THROW_MSG(load("[device]\ntype = \"gpu\"\n" + kMinimal), Error,
                   at(2, 8) + "'device.type' must be one of \"cpu\", \"cuda\", \"auto\", "
                              "found \"gpu\"");
  EXPECT_THROW_MSG(load("[experiment]\nkind = \"benchmark\"\n" + kMinimal), Error,
                   at(2, 8) + "'experiment.kind' must be one of \"train\", \"infer\", "
                              "\"kernel\", found \"benchmark\"");
  EXPECT_THROW_MSG(
      load("[experiment]\nkind = \"infer\"\n[infer]\nmode = \"eval\"\n" + kModel), Error,
      at(4, 8) + "'infer.mode' must be one of \"inference\", \"no_grad\", found \"eval\"");
}

TEST_F(ExperimentTest, EmptyNameIsRejected) {
  EXPECT_THROW_MSG(load("[experiment]\nname = \"\"\n" + kMinimal), Error,
                   at(2, 8) + "'experiment.name' must not be empty");
}

// --- required sections and kind rules ------------------------------------------------

TEST_F(ExperimentTest, MissingModelSection) {
  const Error e = error_of(kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()), file() + ": missing section [model]");
  EXPECT_EQ(e.hint(),
            "every experiment names its model: [model] plugin = \"...\"; run 'runner plugins' "
            "to see what is loaded");
}

TEST_F(ExperimentTest, MissingPluginKey) {
  const Error e = error_of(kData + kOptimizer + "\n[model]\nhidden = [8]\n");
  EXPECT_EQ(std::string(e.what()), at(7, 1) + "missing required key 'plugin' in [model]");
  EXPECT_EQ(e.hint(),
            "name the model plugin, e.g. plugin = \"...\"; run 'runner plugins' to see what is "
            "loaded");
  EXPECT_THROW_MSG(load(kModel + kOptimizer + "[data]\nbatch_size = 8\n"), Error,
                   at(6, 1) + "missing required key 'plugin' in [data]");
}

TEST_F(ExperimentTest, PluginKeyOfWrongTypeOrEmpty) {
  EXPECT_THROW_MSG(load("[model]\nplugin = 3\n" + kData + kOptimizer), Error,
                   at(2, 10) + "'model.plugin' must be a string, found an integer");
  EXPECT_THROW_MSG(load("[model]\nplugin = \"\"\n" + kData + kOptimizer), Error,
                   at(2, 10) + "'model.plugin' must not be empty");
}

TEST_F(ExperimentTest, TrainNeedsDataAndOptimizer) {
  const Error data = error_of(kModel + kOptimizer);
  EXPECT_EQ(std::string(data.what()), file() + ": train experiments need a [data] section");
  EXPECT_EQ(data.hint(),
            "add [data] with a loader plugin (e.g. plugin = \"synthetic\"), or set kind = "
            "\"infer\" in [experiment]");
  const Error optimizer = error_of(kModel + kData);
  EXPECT_EQ(std::string(optimizer.what()),
            file() + ": train experiments need an [optimizer] section");
  EXPECT_EQ(optimizer.hint(),
            "add [optimizer] with an optimizer plugin (e.g. plugin = \"sgd\"), or set kind = "
            "\"infer\" in [experiment]");
}

TEST_F(ExperimentTest, InferRejectsTrainOnlySections) {
  const Error optimizer = error_of("[experiment]\nkind = \"infer\"\n" + kModel + kOptimizer);
  EXPECT_EQ(std::string(optimizer.what()),
            at(5, 1) + "section [optimizer] is only used by train experiments");
  EXPECT_EQ(optimizer.hint(),
            "this experiment has kind = \"infer\"; remove [optimizer] or set kind = \"train\" in "
            "[experiment]");
  EXPECT_THROW_MSG(load("[experiment]\nkind = \"infer\"\n" + kModel + "[train]\nsteps = 3\n"),
                   Error, at(5, 1) + "section [train] is only used by train experiments");
}

TEST_F(ExperimentTest, TrainRejectsInferSection) {
  const Error e = error_of(kMinimal + "[infer]\nbatches = 3\n");
  EXPECT_EQ(std::string(e.what()), at(8, 1) + "section [infer] is only used by infer experiments");
  EXPECT_EQ(e.hint(),
            "this experiment has kind = \"train\"; remove [infer] or set kind = \"infer\" in "
            "[experiment]");
}

TEST_F(ExperimentTest, KindIsKnownBeforeOtherSectionsAreChecked) {
  // [experiment] comes last, yet its kind governs the [train] above it, and
  // the kind rule wins over problems inside the rejected section.
  EXPECT_THROW_MSG(
      load("[train]\nstepz = 1\n" + kModel + "[experiment]\nkind = \"infer\"\n"), Error,
      at(1, 1) + "section [train] is only used by train experiments");
}

// --- plugin names --------------------------------------------------------------------

TEST_F(ExperimentTest, UnknownModelPluginWithSuggestion) {
  const Error e = error_of("[model]\nplugin = \"mlpp\"\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()), at(2, 10) + "unknown model plugin 'mlpp'; did you mean 'mlp'?");
  EXPECT_EQ(e.hint(),
            "available model plugins: mlp, resnet; run 'runner plugins' to see what is loaded");
}

TEST_F(ExperimentTest, UnknownPluginWithoutSuggestion) {
  const Error e = error_of("[model]\nplugin = \"transformer\"\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()), at(2, 10) + "unknown model plugin 'transformer'");
}

TEST_F(ExperimentTest, UnknownLoaderPluginSaysLoader) {
  const Error e = error_of(kModel + "[data]\nplugin = \"synthetc\"\n" + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(4, 10) + "unknown loader plugin 'synthetc'; did you mean 'synthetic'?");
  EXPECT_EQ(e.hint(),
            "available loader plugins: files, synthetic; run 'runner plugins' to see what is "
            "loaded");
  EXPECT_THROW_MSG(load(kModel + kData + "[optimizer]\nplugin = \"adamw\"\n"), Error,
                   at(6, 10) + "unknown optimizer plugin 'adamw'; did you mean 'adam'?");
}

TEST_F(ExperimentTest, NoPluginsLoaded) {
  const FakeCatalog empty;
  const Error e = error_of(kMinimal, &empty);
  EXPECT_EQ(std::string(e.what()), at(2, 10) + "unknown model plugin 'mlp'");
  EXPECT_EQ(e.hint(),
            "no model plugins are loaded; point RUNNER_PLUGIN_PATH, [plugins] path or "
            "--plugin-path at the folder that holds them");
}

// --- plugin options ------------------------------------------------------------------

TEST_F(ExperimentTest, UnknownPluginOption) {
  const Error e = error_of(kModel + "hiden = [8]\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(3, 1) + "unknown option 'hiden' for model plugin 'mlp'; did you mean 'hidden'?");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe mlp' to see its options; [model] also "
                      "takes init_from, strict, check_against, check_tolerance, channels_last");
  EXPECT_THROW_MSG(load(kModel + "colour = 1\n" + kData + kOptimizer), Error,
                   at(3, 1) + "unknown option 'colour' for model plugin 'mlp'");
}

TEST_F(ExperimentTest, UnknownLoaderOptionCanSuggestAHostKey) {
  const Error e = error_of(kModel + kData + "batchsize = 8\n" + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(5, 1) +
                "unknown option 'batchsize' for loader plugin 'synthetic'; did you mean "
                "'batch_size'?");
  EXPECT_EQ(e.hint(),
            "run 'runner plugins describe synthetic' to see its options; [data] also takes "
            "batch_size, shuffle, drop_last, workers, prefetch, pin_memory, on_error, "
            "shuffle_buffer, resize, center_crop, random_crop, crop_padding, hflip, "
            "normalize_mean, normalize_std");
}

TEST_F(ExperimentTest, PluginOptionOfWrongType) {
  const Error e = error_of(kModel + "activation = 1\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(3, 14) + "'model.activation' must be a string, found an integer");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe mlp' to see its options; [model] also "
                      "takes init_from, strict, check_against, check_tolerance, channels_last");
  EXPECT_THROW_MSG(load("[model]\nplugin = \"resnet\"\ndepth = 18.0\n" + kData + kOptimizer),
                   Error, at(3, 9) + "'model.depth' must be an integer, found a float");
  EXPECT_THROW_MSG(load(kModel + "dropout = \"0.1\"\n" + kData + kOptimizer), Error,
                   at(3, 11) + "'model.dropout' must be a number, found a string");
  EXPECT_THROW_MSG(load(kModel + "hidden = { a = 1 }\n" + kData + kOptimizer), Error,
                   at(3, 10) + "'model.hidden' must be a list of integers, found a table");
}

TEST_F(ExperimentTest, IntegerIsAcceptedForANumberOption) {
  const Experiment e =
      load(kModel + "dropout = 1\n" + kData + "[optimizer]\nplugin = \"sgd\"\nlr = 2\n");
  EXPECT_TRUE(std::holds_alternative<double>(e.model.options.at("dropout")));
  EXPECT_EQ(e.model.options.number("dropout"), 1.0);
  EXPECT_EQ(e.optimizer->options.number("lr"), 2.0);
}

TEST_F(ExperimentTest, ListOptionTypeErrors) {
  auto model = [&](const std::string& line) {
    return load(kModel + line + "\n" + kData + kOptimizer);
  };
  EXPECT_THROW_MSG(model("hidden = 64"), Error,
                   at(3, 10) + "'model.hidden' must be a list of integers, found an integer");
  EXPECT_THROW_MSG(model("hidden = [64, \"a\"]"), Error,
                   at(3, 15) + "'model.hidden[1]' must be an integer, found a string");
  EXPECT_THROW_MSG(model("hidden = [1.5]"), Error,
                   at(3, 11) + "'model.hidden[0]' must be an integer, found a float");
  EXPECT_THROW_MSG(model("hidden = [[1]]"), Error,
                   at(3, 11) + "'model.hidden[0]' must be an integer, found an array");
  auto adam = [&](const std::string& line) {
    return load(kModel + kData + "[optimizer]\nplugin = \"adam\"\n" + line + "\n");
  };
  EXPECT_THROW_MSG(adam("betas = [0.9, \"x\"]"), Error,
                   at(7, 15) + "'optimizer.betas[1]' must be a number, found a string");
  EXPECT_THROW_MSG(adam("betas = 0.9"), Error,
                   at(7, 9) + "'optimizer.betas' must be a list of numbers, found a float");
}

TEST_F(ExperimentTest, StringListOptions) {
  auto lamb = [&](const std::string& line) {
    return load(kModel + kData + "[optimizer]\nplugin = \"lamb\"\n" + line + "\n");
  };
  const Experiment e = lamb("no_decay = [\"ln\", \"bias\"]");
  EXPECT_EQ(e.optimizer->options.strings("no_decay"), (std::vector<std::string>{"ln", "bias"}));
  EXPECT_EQ(e.optimizer->options.strings("groups"), std::vector<std::string>{"a"});  // default
  // Canonical JSON: an array of JSON strings, in the given order.
  EXPECT_NE(e.resolved_json().find("\"no_decay\":[\"ln\",\"bias\"]"), std::string::npos)
      << e.resolved_json();
  EXPECT_TRUE(lamb("no_decay = []").optimizer->options.strings("no_decay").empty());
  EXPECT_THROW_MSG(lamb("no_decay = \"bias\""), Error,
                   at(7, 12) + "'optimizer.no_decay' must be a list of strings, found a string");
  EXPECT_THROW_MSG(lamb("no_decay = [\"bias\", 1]"), Error,
                   at(7, 21) + "'optimizer.no_decay[1]' must be a string, found an integer");
  EXPECT_THROW_MSG(lamb("groups = [\"a\", \"c\"]"), Error,
                   at(7, 16) + "'optimizer.groups[1]' must be one of \"a\", \"b\", found \"c\"");
}

TEST_F(ExperimentTest, ListLengthBounds) {
  auto lamb = [&](const std::string& line) {
    return load(kModel + kData + "[optimizer]\nplugin = \"lamb\"\n" + line + "\n");
  };
  EXPECT_EQ(lamb("betas = [0.8, 0.9]").optimizer->options.numbers("betas"),
            (std::vector<double>{0.8, 0.9}));
  EXPECT_THROW_MSG(lamb("betas = [0.9]"), Error,
                   at(7, 9) + "'optimizer.betas' must have exactly 2 items, found 1");
  EXPECT_THROW_MSG(lamb("betas = [0.9, 0.9, 0.9]"), Error,
                   at(7, 9) + "'optimizer.betas' must have exactly 2 items, found 3");
  EXPECT_THROW_MSG(lamb("no_decay = [\"a\", \"b\", \"c\", \"d\"]"), Error,
                   at(7, 12) + "'optimizer.no_decay' must have at most 3 items, found 4");
  EXPECT_THROW_MSG(lamb("groups = []"), Error,
                   at(7, 10) + "'optimizer.groups' must have between 1 and 2 items, found 0");
  EXPECT_THROW_MSG(lamb("sizes = [1, 2, 3]"), Error,
                   at(7, 9) + "'optimizer.sizes' must have at most 2 items, found 3");
}

TEST_F(ExperimentTest, NumberListAcceptsIntegers) {
  const Experiment e = load(kModel + kData + "[optimizer]\nplugin = \"adam\"\nbetas = [1, 0.5]\n");
  EXPECT_EQ(e.optimizer->options.numbers("betas"), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(e.optimizer->options.number("lr"), 0.001);  // default
}

TEST_F(ExperimentTest, PluginOptionRanges) {
  auto model = [&](const std::string& plugin, const std::string& line) {
    return load("[model]\nplugin = \"" + plugin + "\"\n" + line + "\n" + kData + kOptimizer);
  };
  EXPECT_THROW_MSG(model("mlp", "dropout = 1.5"), Error,
                   at(3, 11) + "'model.dropout' must be between 0 and 1, found 1.5");
  EXPECT_THROW_MSG(model("mlp", "dropout = -1"), Error,
                   at(3, 11) + "'model.dropout' must be between 0 and 1, found -1");
  EXPECT_THROW_MSG(model("resnet", "depth = 200"), Error,
                   at(3, 9) + "'model.depth' must be <= 152, found 200");
  EXPECT_THROW_MSG(model("mlp", "hidden = [8, 0]"), Error,
                   at(3, 14) + "'model.hidden[1]' must be >= 1, found 0");
  EXPECT_THROW_MSG(load(kModel + kData + "[optimizer]\nplugin = \"sgd\"\nlr = -0.1\n"), Error,
                   at(7, 6) + "'optimizer.lr' must be >= 0, found -0.1");
  EXPECT_THROW_MSG(load(kModel + kData + "[optimizer]\nplugin = \"adam\"\nbetas = [0.9, 1.5]\n"),
                   Error, at(7, 15) + "'optimizer.betas[1]' must be between 0 and 1, found 1.5");
  // Bounds hold inclusively.
  EXPECT_EQ(model("mlp", "dropout = 1.0").model.options.number("dropout"), 1.0);
  EXPECT_EQ(model("resnet", "depth = 152").model.options.integer("depth"), 152);
}

TEST_F(ExperimentTest, PluginOptionChoices) {
  const Error e = error_of(kModel + "activation = \"swish\"\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(3, 14) + "'model.activation' must be one of \"relu\", \"gelu\", \"tanh\", "
                        "found \"swish\"");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe mlp' to see its options; [model] also "
                      "takes init_from, strict, check_against, check_tolerance, channels_last");
}

TEST_F(ExperimentTest, ListTooShort) {
  EXPECT_THROW_MSG(load(kModel + "hidden = []\n" + kData + kOptimizer), Error,
                   at(3, 10) + "'model.hidden' must have at least 1 item, found 0");
  EXPECT_THROW_MSG(load(kModel + kData + "[optimizer]\nplugin = \"adam\"\nbetas = [0.9]\n"),
                   Error, at(7, 9) + "'optimizer.betas' must have at least 2 items, found 1");
}

TEST_F(ExperimentTest, NonFiniteNumbersAreRejected) {
  EXPECT_THROW_MSG(load(kModel + "dropout = nan\n" + kData + kOptimizer), Error,
                   at(3, 11) + "'model.dropout' must be a finite number, found nan");
  EXPECT_THROW_MSG(load(kModel + kData + "[optimizer]\nplugin = \"sgd\"\nlr = inf\n"), Error,
                   at(7, 6) + "'optimizer.lr' must be a finite number, found inf");
}

TEST_F(ExperimentTest, MissingRequiredPluginOption) {
  const Error e = error_of(kModel + kData + "\n[optimizer]\nplugin = \"sgd\"\nmomentum = 0.9\n");
  EXPECT_EQ(std::string(e.what()),
            at(6, 1) + "missing required option 'lr' for optimizer plugin 'sgd'");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe sgd' to see its options");
}

// --- [plugins] -----------------------------------------------------------------------

TEST_F(ExperimentTest, PluginPathsResolveAgainstTheFilesFolder) {
  const fs::path path = write(
      "[experiment]\nkind = \"infer\"\n"
      "[plugins]\npath = \"build/plugins\"\n[model]\nplugin = \"not-loaded-yet\"\n",
      "sub/exp.toml");
  // Phase 1 needs no plugins: that is how [plugins] path can name where they are.
  const auto parsed = parse_experiment_file(path);
  EXPECT_EQ(plugin_paths_of(*parsed), (std::vector<fs::path>{dir_ / "sub" / "build" / "plugins"}));
}

TEST_F(ExperimentTest, PluginPathListKeepsOrderAndAbsolutePaths) {
  const Experiment e =
      load("[plugins]\npath = [\"a\", \"/opt/runner/plugins\", \"../b/\"]\n" + kMinimal);
  const std::vector<fs::path> expected = {dir_ / "a", "/opt/runner/plugins",
                                          dir_.parent_path() / "b" / ""};
  EXPECT_EQ(e.plugin_paths, expected);
  EXPECT_EQ(plugin_paths_of(*parse_experiment_file(dir_ / "exp.toml")), expected);
}

TEST_F(ExperimentTest, PluginPathTypeErrors) {
  EXPECT_THROW_MSG(load("[plugins]\npath = 3\n" + kMinimal), Error,
                   at(2, 8) + "'plugins.path' must be a string or a list of strings, found an "
                              "integer");
  EXPECT_THROW_MSG(load("[plugins]\npath = [\"a\", 1]\n" + kMinimal), Error,
                   at(2, 14) + "'plugins.path[1]' must be a string, found an integer");
  EXPECT_THROW_MSG(load("[plugins]\npath = \"\"\n" + kMinimal), Error,
                   at(2, 8) + "'plugins.path' must not be empty");
  EXPECT_THROW_MSG(load("[plugins]\npaths = \"x\"\n" + kMinimal), Error,
                   at(2, 1) + "unknown key 'paths' in [plugins]; did you mean 'path'?");
}

// --- canonical JSON and hash ---------------------------------------------------------

TEST_F(ExperimentTest, ResolvedJsonOfASmallExample) {
  const Experiment e = load(
      "[experiment]\nname = \"n\"\nseed = 3\n"
      "[model]\nplugin = \"mlp\"\ndropout = 0.25\n"
      "[data]\nplugin = \"synthetic\"\nbatch_size = 8\n"
      "[optimizer]\nplugin = \"sgd\"\nlr = 1\n"
      "[train]\nsteps = 5\n");
  const std::string expected =
      "{\"data\":{\"batch_size\":8,\"drop_last\":true,"
      "\"options\":{\"label\":\"\",\"shape\":[8],\"size\":1024},\"plugin\":\"synthetic\","
      "\"shuffle\":true},"
      "\"device\":{\"interop_threads\":0,\"threads\":0,\"type\":\"cpu\"},"
      "\"kind\":\"train\","
      "\"model\":{\"options\":{\"activation\":\"relu\",\"dropout\":0.25,\"hidden\":[64]},"
      "\"plugin\":\"mlp\"},"
      "\"optimizer\":{\"options\":{\"lr\":1.0,\"momentum\":0.0},\"plugin\":\"sgd\"},"
      "\"seed\":3,"
      "\"train\":{\"steps\":5,\"warmup\":10}}";
  EXPECT_EQ(e.resolved_json(), expected);
  EXPECT_EQ(e.config_hash(), sha256_hex(expected));
  EXPECT_EQ(e.config_hash().size(), 64u);
}

TEST_F(ExperimentTest, ResolvedJsonOfAnInferExperimentHasNoTrainSettings) {
  const Experiment e =
      load("[experiment]\nkind = \"infer\"\n[model]\nplugin = \"resnet\"\n[infer]\nbatches = 7\n");
  EXPECT_EQ(e.resolved_json(),
            "{\"device\":{\"interop_threads\":0,\"threads\":0,\"type\":\"cpu\"},"
            "\"infer\":{\"batches\":7,\"mode\":\"inference\",\"warmup\":10},"
            "\"kind\":\"infer\",\"model\":{\"options\":{\"depth\":18},\"plugin\":\"resnet\"},"
            "\"seed\":0}");
}

TEST_F(ExperimentTest, ResolvedJsonEscapesStringsAndKeepsFloatsFloats) {
  const Experiment e = load(kModel + kData + "label = \"a\\\"b\\\\c\\n\\u0001\"\n" +
                            "[optimizer]\nplugin = \"sgd\"\nlr = 1e-5\nmomentum = 0.1\n");
  const std::string json = e.resolved_json();
  EXPECT_NE(json.find("\"label\":\"a\\\"b\\\\c\\n\\u0001\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"lr\":1e-05,\"momentum\":0.1}"), std::string::npos) << json;
  EXPECT_EQ(json.find(' '), std::string::npos) << json;
}

TEST_F(ExperimentTest, SameContentInAnyOrderHashesTheSame) {
  const Experiment a = load(
      "[experiment]\nname = \"a\"\nseed = 1\n"
      "[model]\nplugin = \"mlp\"\nhidden = [32, 16]\nactivation = \"gelu\"\n"
      "[data]\nplugin = \"synthetic\"\nsize = 10\nbatch_size = 4\n"
      "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n"
      "[train]\nsteps = 5\nwarmup = 1\n",
      "a.toml");
  // Sections and keys reordered, an inline table, comments, a different
  // name/description/repeats, and a default spelled out: still the same trial.
  const Experiment b = load(
      "# same trial\n"
      "model = { activation = \"gelu\", hidden = [32, 16], plugin = \"mlp\", dropout = 0.0 }\n"
      "[train]\nwarmup = 1\nsteps = 5\n"
      "[optimizer]\nmomentum = 0.9\nlr = 0.1\nplugin = \"sgd\"\n"
      "[data]\nbatch_size = 4\nsize = 10\nplugin = \"synthetic\"\nshuffle = true\n"
      "[experiment]\nseed = 1\nname = \"b\"\ndescription = \"x\"\nrepeats = 9\n"
      "[plugins]\npath = \"elsewhere\"\n",
      "b.toml");
  EXPECT_EQ(a.resolved_json(), b.resolved_json());
  EXPECT_EQ(a.config_hash(), b.config_hash());
}

TEST_F(ExperimentTest, AChangedValueChangesTheHash) {
  const std::string base = kModel + kData + "[optimizer]\nplugin = \"sgd\"\n";
  const std::string reference = load(base + "lr = 0.1\n").config_hash();
  EXPECT_NE(load(base + "lr = 0.2\n").config_hash(), reference);
  EXPECT_NE(load(base + "lr = 0.1\nmomentum = 0.5\n").config_hash(), reference);
  EXPECT_NE(load("[experiment]\nseed = 1\n" + base + "lr = 0.1\n").config_hash(), reference);
  EXPECT_NE(load("[train]\nsteps = 99\n" + base + "lr = 0.1\n").config_hash(), reference);
  EXPECT_NE(load("[device]\nthreads = 2\n" + base + "lr = 0.1\n").config_hash(), reference);
  EXPECT_NE(load(kModel + "hidden = [64, 64]\n" + kData + kOptimizer).config_hash(),
            load(kMinimal).config_hash());
  EXPECT_NE(load(kModel + kData + "shuffle = false\n" + kOptimizer).config_hash(),
            load(kMinimal).config_hash());
}

}  // namespace
}  // namespace runner
