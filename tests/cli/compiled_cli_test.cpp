// Compiled and exported models through the runner executable: the aoti and
// torchscript plugins run what python/runner_export.py wrote (the fixture
// exported_models.make, tests/oracle/exported_models.py), reproduce
// PyTorch's outputs (model.check_against), train a TorchScript module as
// PyTorch does, identify a trial by the file's bytes, and refuse a package
// made for another device, torch version, batch or sample shape before any
// run, at the option's file:line:col.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "runner/common/sha256.hpp"
#include "runner/weights/state.hpp"
#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;

const fs::path kModels = RUNNER_EXPORTED_MODELS;
const fs::path kCompared = RUNNER_COMPARED_MODELS;

class CompiledCliTest : public runner::test::CliTestBase {
 protected:
  CompiledCliTest() : CliTestBase("runner-compiled-") {}

  void SetUp() override {
    const std::string missing = runner::test::oracle_missing("torch,safetensors,numpy");
    if (!missing.empty()) GTEST_SKIP() << missing;
    ASSERT_TRUE(fs::exists(kModels / "stamp"))
        << kModels << " has not been written: run the suite through ctest (the fixture "
        << "exported_models.make runs tests/oracle/exported_models.py)";
  }

  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, {}});
  }

  // Inference of `model` (the [model] lines) on synthetic float samples.
  fs::path infer(const std::string& name, const std::string& model,
                 const std::string& shape = "[3, 4]", int batch = 4,
                 const std::string& rest = "") const {
    return write(name, "[experiment]\nname = \"" + name + "\"\nkind = \"infer\"\n\n[model]\n" + model +
                           "\n[data]\nplugin = \"synthetic\"\nshape = " + shape +
                           "\nclasses = 5\nsize = 64\nbatch_size = " + std::to_string(batch) +
                           "\n\n[infer]\nbatches = 4\nwarmup = 1\n" + rest);
  }

  std::string metric(const std::string& name) const {
    return runner::test::query_text(db_, "SELECT value FROM metrics WHERE name = '" + name + "'");
  }

  // `runner run` and `runner validate` exit 2 with stderr's first line
  // starting "error: FILE:L:C: `prefix`" (L:C of `assignment`), nothing recorded.
  void expect_refused_starting(const fs::path& file, const std::string& assignment,
                               const std::string& prefix) const {
    for (const std::string command : {"run", "validate"}) {
      const Result r = runner(command + " " + file.string());
      EXPECT_EQ(r.code, 2) << command << "\n" << r.err;
      const std::string first = r.err.substr(0, r.err.find('\n'));
      const std::string expected = "error: " + file.string() + ":" +
                                   runner::test::value_position(file, assignment) + ": " + prefix;
      EXPECT_EQ(first.substr(0, expected.size()), expected) << command << "\n" << first;
      EXPECT_FALSE(fs::exists(db_) && runner::test::query_int(db_, "SELECT count(*) FROM runs") > 0);
    }
  }
};

std::string quoted(const fs::path& p) { return "\"" + p.string() + "\""; }

// How the aoti plugin's refusals of `package` begin.
std::string package_refused(const fs::path& package) {
  return "'model.package' of model plugin 'aoti': the package '" + package.string() + "'";
}

TEST_F(CompiledCliTest, AnAotiPackageRunsAndComputesWhatPyTorchComputes) {
  const fs::path package = kModels / "mlp.pt2";
  const fs::path file =
      infer("aoti.toml", "plugin = \"aoti\"\npackage = " + quoted(package) +
                             "\ncheck_against = " + quoted(kModels / "mlp.reference.safetensors") + "\n");
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
  const double error = std::stod(metric("output_max_rel_error"));
  EXPECT_LT(error, 1e-5);
  EXPECT_GE(std::stod(metric("first_call_s")), 0.0);
  // 12 x 16 + 16 + 16 x 5 + 5 parameters, from the package's metadata.
  EXPECT_EQ(metric("parameters"), "293.0");
  EXPECT_GT(runner::test::query_int(db_, "SELECT count(*) FROM summaries WHERE metric = 'latency'"), 0);
  // The package's bytes and its provenance are recorded with the run.
  EXPECT_EQ(runner::test::query_text(db_, "SELECT sha256 FROM run_files WHERE role = 'model.package'"),
            runner::sha256_file_hex(package));
  const auto attribute = [&](const std::string& name) {
    return runner::test::query_text(db_, "SELECT value FROM run_attributes WHERE name = '" + name + "'");
  };
  EXPECT_EQ(attribute("model.format"), "aoti");
  EXPECT_EQ(attribute("model.device"), "cpu");
  EXPECT_EQ(attribute("model.input_shape"), "4,3,4");
  EXPECT_EQ(attribute("model.dynamic_dims"), "");
  EXPECT_EQ(attribute("model.torch_version").substr(0, 2), "2.");
  EXPECT_FALSE(attribute("model.aoti.CPU_ISA").empty());
  // `runner show` prints them.
  const Result shown = runner("show 1");
  ASSERT_EQ(shown.code, 0) << shown.err;
  const auto line = shown.out.find("\nmodel.format ");
  ASSERT_NE(line, std::string::npos) << shown.out;
  const std::string rest = shown.out.substr(line + 1, shown.out.find('\n', line + 1) - line - 1);
  EXPECT_EQ(rest.substr(rest.find_last_of(' ') + 1), "aoti") << rest;
  EXPECT_NE(shown.out.find("model.package"), std::string::npos) << shown.out;
}

TEST_F(CompiledCliTest, TheSamePackageBytesElsewhereAreTheSameTrialAndOtherBytesAreNot) {
  const fs::path copy = dir_ / "copy.pt2";
  fs::copy_file(kModels / "mlp.pt2", copy);
  const fs::path file = infer("same.toml", "plugin = \"aoti\"\npackage = " + quoted(kModels / "mlp.pt2") + "\n");
  ASSERT_EQ(runner("run " + file.string()).code, 0);
  const Result again = runner("run " + file.string() + " --set 'model.package=" + quoted(copy) + "'");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM runs"), 1) << again.out;
  // The dynamic package is other bytes: a new trial.
  const Result other =
      runner("run " + file.string() + " --set 'model.package=" + quoted(kModels / "mlp_dynamic.pt2") + "'");
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(DISTINCT trial_id) FROM runs"), 2);
}

TEST_F(CompiledCliTest, APackageWithADynamicBatchRunsAtAnyBatch) {
  const fs::path file = infer(
      "dynamic.toml",
      "plugin = \"aoti\"\npackage = " + quoted(kModels / "mlp_dynamic.pt2") +
          "\ncheck_against = " + quoted(kModels / "mlp_dynamic.reference.safetensors") + "\n",
      "[3, 4]", 7);
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
  EXPECT_LT(std::stod(metric("output_max_rel_error")), 1e-5);
  EXPECT_EQ(runner::test::query_text(db_, "SELECT value FROM run_attributes WHERE name = "
                                          "'model.dynamic_dims'"),
            "0");
}

TEST_F(CompiledCliTest, TorchScriptRunsPlainFrozenAndOptimizedWithPyTorchsOutputs) {
  const fs::path file = infer(
      "ts.toml",
      "plugin = \"torchscript\"\nfile = " + quoted(kModels / "mlp.ts") +
          "\ncheck_against = " + quoted(kModels / "mlp.reference.safetensors") + "\n",
      "[3, 4]", 4,
      "\n[[trial]]\n[[trial]]\n\"model.freeze\" = true\n[[trial]]\n"
      "\"model.optimize_for_inference\" = true\n");
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 3);
  EXPECT_LT(std::stod(runner::test::query_text(
                db_, "SELECT max(value) FROM metrics WHERE name = 'output_max_rel_error'")),
            1e-5);
  EXPECT_EQ(runner::test::query_text(db_, "SELECT group_concat(value, ',') FROM (SELECT value "
                                          "FROM run_attributes WHERE name = 'model.frozen' "
                                          "ORDER BY run_id)"),
            "false,true,true");
}

TEST_F(CompiledCliTest, ATokenModelRunsOnTokenData) {
  const fs::path file = write(
      "lm.toml", "[experiment]\nkind = \"infer\"\n\n[model]\nplugin = \"torchscript\"\nfile = " +
                     quoted(kModels / "lm.ts") + "\ncheck_against = " +
                     quoted(kModels / "lm.reference.safetensors") +
                     "\n\n[data]\nplugin = \"synthetic_tokens\"\nvocab = 11\nseq_len = 6\n"
                     "size = 32\nbatch_size = 2\n\n[infer]\nbatches = 3\nwarmup = 1\n");
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
  EXPECT_LT(std::stod(metric("output_max_rel_error")), 1e-5);
}

TEST_F(CompiledCliTest, ATorchScriptModuleTrainsAsPyTorchTrainsIt) {
  // Two SGD steps over inputs.npy in order, batch 4: the weights PyTorch
  // has after the same two steps (exported_models.py).
  const fs::path train = kModels / "train";
  const fs::path file = write(
      "train.toml", "[model]\nplugin = \"torchscript\"\nfile = " + quoted(kModels / "mlp.ts") +
                        "\n\n[data]\nplugin = \"npy\"\ninputs = " + quoted(train / "inputs.npy") +
                        "\nlabels = " + quoted(train / "labels.npy") +
                        "\nclasses = 5\nbatch_size = 4\nshuffle = false\n\n[optimizer]\n"
                        "plugin = \"sgd\"\nlr = 0.1\n\n[train]\nsteps = 2\nwarmup = 0\n"
                        "save_to = \"trained.safetensors\"\n");
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir_ / "trained.safetensors"));
  const auto mine = runner::weights::read_safetensors_tensors(dir_ / "trained.safetensors");
  const auto theirs = runner::weights::read_safetensors_tensors(train / "after_sgd.safetensors");
  ASSERT_EQ(mine.size(), theirs.size());
  for (const auto& [name, expected] : theirs) {
    ASSERT_EQ(mine.count(name), 1u) << name;
    EXPECT_LT((mine.at(name) - expected).abs().max().item<double>(), 1e-6) << name;
  }
  // The untrained file's weights differ from these: the steps did something.
  const auto before = runner::weights::read_safetensors_tensors(kModels / "mlp.safetensors");
  EXPECT_GT((before.at("1.weight") - theirs.at("1.weight")).abs().max().item<double>(), 1e-4);
}

TEST_F(CompiledCliTest, AModelThatComputesSomethingElseFailsAndIsNotTimed) {
  const fs::path file = infer("wrong.toml", "plugin = \"aoti\"\npackage = " + quoted(kModels / "mlp.pt2") +
                                                "\ncheck_against = " +
                                                quoted(kModels / "mlp.wrong.safetensors") + "\n");
  const Result r = runner("run " + file.string());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "failed");
  const std::string error = runner::test::query_text(db_, "SELECT error FROM runs");
  EXPECT_EQ(error.rfind("model.check_against: the model's output differs from the reference in '" +
                            (kModels / "mlp.wrong.safetensors").string() + "' by ",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find("more than check_tolerance = 0.0001: a path that computes something else "
                       "is not timed"),
            std::string::npos)
      << error;
  // Its error figure is recorded; no step was timed.
  EXPECT_GT(std::stod(metric("output_max_rel_error")), 1e-4);
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM samples"), 0);
}

TEST_F(CompiledCliTest, TheShippedComparisonValidatesAndEveryPathAgreesWithPyTorch) {
  // experiments/eager_vs_compiled.toml beside the models scripts/make_models.py
  // wrote (the fixture compared_models.make), as a user has them: ResNet-18
  // and the small GPT, native eager, TorchScript and AOTInductor, batch 1 and
  // 32, each checked against PyTorch's output before it is timed.
  ASSERT_TRUE(fs::exists(kCompared / "gpt2-b32.pt2")) << kCompared;
  const fs::path experiments = dir_ / "experiments";
  fs::create_directories(experiments);
  const fs::path file = experiments / "eager_vs_compiled.toml";
  fs::copy_file(fs::path(RUNNER_SOURCE_DIR) / "experiments" / "eager_vs_compiled.toml", file);
  fs::create_directory_symlink(kCompared, dir_ / "models");
  const Result valid = runner("validate " + file.string());
  ASSERT_EQ(valid.code, 0) << valid.err;
  EXPECT_EQ(valid.out.substr(0, valid.out.find('\n')), file.string() + ": ok");
  const Result r = runner("run " + file.string() +
                          " --set infer.batches=1 --set infer.warmup=0 --set experiment.repeats=1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM runs WHERE status = 'finished'"), 12);
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM metrics WHERE name = "
                                         "'output_max_rel_error' AND value < 1e-3"),
            12);
}

TEST_F(CompiledCliTest, AMissingReferenceIsRefusedAtItsKey) {
  const fs::path file = infer("noref.toml", "plugin = \"aoti\"\npackage = " + quoted(kModels / "mlp.pt2") +
                                                "\ncheck_against = \"nope.safetensors\"\n");
  expect_refused(file, "check_against = ",
                 "model.check_against names '" + (dir_ / "nope.safetensors").string() +
                     "', which does not exist");
}

TEST_F(CompiledCliTest, AMissingPackageIsRefusedAtItsOption) {
  const fs::path file = infer("missing.toml", "plugin = \"aoti\"\npackage = \"nope.pt2\"\n");
  expect_refused(file, "package = \"nope.pt2\"",
                 "model.package names '" + (dir_ / "nope.pt2").string() + "', which does not exist");
}

TEST_F(CompiledCliTest, AModelNameThePackageDoesNotHoldIsRefused) {
  const fs::path file = infer("name.toml", "plugin = \"aoti\"\npackage = " + quoted(kModels / "mlp.pt2") +
                                               "\nmodel_name = \"resnet\"\n");
  expect_refused_starting(file, "model_name = \"resnet\"",
                          "'model.model_name' of model plugin 'aoti': the package '" +
                              (kModels / "mlp.pt2").string() +
                              "' has no AOTInductor model 'resnet', or is not an AOTInductor "
                              "package (");
}

TEST_F(CompiledCliTest, ACudaPackageOnACpuRunIsRefused) {
  const fs::path package = kModels / "mlp_cuda.pt2";
  const fs::path file = infer("cuda.toml", "plugin = \"aoti\"\npackage = " + quoted(package) + "\n");
  expect_refused(file, "package = ",
                 package_refused(package) +
                     " was compiled for cuda; this run's device is cpu. Export it with --device "
                     "cpu, or set device.type = \"cuda\"");
}

TEST_F(CompiledCliTest, APackageFromAnotherTorchIsRefused) {
  const fs::path package = kModels / "mlp_torch1.pt2";
  const fs::path file = infer("torch1.toml", "plugin = \"aoti\"\npackage = " + quoted(package) + "\n");
  expect_refused_starting(file, "package = ",
                          package_refused(package) + " was made by torch 1.13.0; runner runs LibTorch ");
}

TEST_F(CompiledCliTest, ABatchThePackageWasNotCompiledForIsRefused) {
  const fs::path package = kModels / "mlp.pt2";
  const fs::path file =
      infer("batch.toml", "plugin = \"aoti\"\npackage = " + quoted(package) + "\n", "[3, 4]", 8);
  expect_refused(file, "package = ",
                 package_refused(package) +
                     " was compiled for batch 4 and this run's batch is 8. Set data.batch_size "
                     "= 4, or export with --dynamic-batch");
}

TEST_F(CompiledCliTest, SamplesOfAnotherShapeAreRefused) {
  const fs::path package = kModels / "mlp.pt2";
  const fs::path file =
      infer("shape.toml", "plugin = \"aoti\"\npackage = " + quoted(package) + "\n", "[3, 5]");
  expect_refused(file, "package = ",
                 package_refused(package) +
                     " was exported for samples of shape [3, 4]; the data gives [3, 5]. Export "
                     "it with the data's sample shape, or change [data]");
}

TEST_F(CompiledCliTest, TrainingAnAotiPackageIsRefused) {
  const fs::path package = kModels / "mlp.pt2";
  const fs::path file = write(
      "train.toml", "[model]\nplugin = \"aoti\"\npackage = " + quoted(package) +
                        "\n\n[data]\nplugin = \"synthetic\"\nshape = [3, 4]\nclasses = 5\n"
                        "batch_size = 4\n\n[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n");
  expect_refused(file, "package = ",
                 package_refused(package) +
                     " runs inference only (AOTInductor compiles the forward pass); set "
                     "experiment.kind = \"infer\", or train its model with the torchscript plugin");
}

TEST_F(CompiledCliTest, AFileThatIsNotATorchScriptModuleIsRefused) {
  const fs::path ts = kModels / "not_a_module.ts";
  const fs::path file = infer("notts.toml", "plugin = \"torchscript\"\nfile = " + quoted(ts) + "\n");
  expect_refused_starting(file, "file = ",
                          "'model.file' of model plugin 'torchscript': the TorchScript file '" +
                              ts.string() + "' is not a TorchScript module (");
}

TEST_F(CompiledCliTest, FreezingAModuleThatTrainsIsRefused) {
  const fs::path file = write(
      "frozen.toml", "[model]\nplugin = \"torchscript\"\nfile = " + quoted(kModels / "mlp.ts") +
                         "\nfreeze = true\n\n[data]\nplugin = \"synthetic\"\nshape = [3, 4]\n"
                         "classes = 5\nbatch_size = 4\n\n[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n");
  expect_refused(file, "freeze = true",
                 "'model.freeze' of model plugin 'torchscript': freezing inlines the weights as "
                 "constants, so a frozen module cannot train; use it with experiment.kind = "
                 "\"infer\"");
}

TEST_F(CompiledCliTest, TheExporterNamesWhyAModelCannotBeExported) {
  // exported_models.py ran runner-export on a model whose control flow
  // depends on its input's values: exit 1 and torch's reason.
  const std::string text = runner::test::slurp(kModels / "breaks.txt");
  EXPECT_EQ(text.substr(0, 2), "1\n") << text;
  EXPECT_NE(text.find("runner-export: cannot export the model: torch.export could not export "
                      "the model: Could not guard on data-dependent expression"),
            std::string::npos)
      << text;
  // Nothing half-written.
  for (const char* suffix : {".pt2", ".ts", ".safetensors", ".reference.safetensors", ".json"})
    EXPECT_FALSE(fs::exists(kModels / (std::string("breaks") + suffix))) << suffix;
}

}  // namespace
