// Weights through the command line: init_from problems stop `runner run`
// and `runner validate` with exit code 2 before anything is recorded; a
// trained model's save_to file loads into the same model in Python.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "runner/common/sha256.hpp"
#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;

class WeightsCliTest : public runner::test::CliTestBase {
 protected:
  WeightsCliTest() : CliTestBase("runner-weights-") {}

  Result runner(const std::string& args) const {
    return runner::test::run_runner(args, dir_, {db_, {}});
  }

  // An image classifier on synthetic 3x32x32 data in 10 classes.
  fs::path experiment(const std::string& name, const std::string& model_lines,
                      const std::string& rest = "") const {
    return write(name, "[experiment]\nname = \"" + name +
                           "\"\n\n[model]\nplugin = \"resnet\"\nstem = \"cifar\"\n" + model_lines +
                           "\n[data]\nplugin = \"synthetic\"\nshape = [3, 32, 32]\nclasses = "
                           "10\nsize = 8\nbatch_size = 2\n\n[optimizer]\nplugin = \"sgd\"\nlr = "
                           "0.01\n\n[train]\nsteps = 1\nwarmup = 0\n" +
                           rest);
  }

  // Runs `file`, expects exit 2 with `message` first on stderr, and no run recorded.
  void expect_refused(const fs::path& file, const std::string& message) const {
    for (const std::string command : {"run", "validate"}) {
      const Result r = runner(command + " " + file.string());
      EXPECT_EQ(r.code, 2) << command << "\n" << r.err;
      EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "error: " + message) << command;
      EXPECT_FALSE(fs::exists(db_) &&
                   runner::test::query_int(db_, "SELECT count(*) FROM runs") > 0);
    }
  }
};

TEST_F(WeightsCliTest, AMissingFileIsRefusedWithItsPosition) {
  const fs::path file = experiment("missing.toml", "init_from = \"nope.safetensors\"\n");
  expect_refused(file, file.string() + ":7:13: model.init_from names '" +
                           (dir_ / "nope.safetensors").string() + "', which does not exist");
}

TEST_F(WeightsCliTest, BrokenFilesAreRefusedNamingTheFile) {
  // Truncated: the header promises more bytes than there are.
  std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  std::string length(8, '\0');
  length[0] = static_cast<char>(header.size());
  runner::test::write_file(dir_ / "short.safetensors", length + header + std::string(8, '\0'));
  // Lying: the byte range does not match dtype and shape.
  std::string lie = R"({"w":{"dtype":"F32","shape":[8],"data_offsets":[0,16]}})";
  std::string lie_length(8, '\0');
  lie_length[0] = static_cast<char>(lie.size());
  runner::test::write_file(dir_ / "lie.safetensors", lie_length + lie + std::string(16, '\0'));
  runner::test::write_file(dir_ / "text.pt", "not weights at all");

  const fs::path truncated = experiment("short.toml", "init_from = \"short.safetensors\"\n");
  const Result a = runner("run " + truncated.string());
  EXPECT_EQ(a.code, 2) << a.err;
  EXPECT_NE(a.err.find((dir_ / "short.safetensors").string()), std::string::npos) << a.err;
  const fs::path lying = experiment("lie.toml", "init_from = \"lie.safetensors\"\n");
  const Result b = runner("run " + lying.string());
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_NE(b.err.find((dir_ / "lie.safetensors").string()), std::string::npos) << b.err;
  const fs::path text = experiment("text.toml", "init_from = \"text.pt\"\n");
  const Result c = runner("validate " + text.string());
  EXPECT_EQ(c.code, 2) << c.err;
  EXPECT_NE(c.err.find((dir_ / "text.pt").string()), std::string::npos) << c.err;
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(WeightsCliTest, AResNet50StateForAResNet18ListsWhatDiffers) {
  // resnet50 weights written by runner itself, then given to a resnet18.
  const fs::path fifty =
      experiment("fifty.toml", "depth = 50\n", "save_to = \"resnet50.safetensors\"\n");
  const Result trained = runner("run " + fifty.string());
  ASSERT_EQ(trained.code, 0) << trained.err;
  const fs::path weights = dir_ / "resnet50.safetensors";
  ASSERT_TRUE(fs::exists(weights));
  const std::int64_t runs = runner::test::query_int(db_, "SELECT count(*) FROM runs");

  const fs::path eighteen =
      experiment("eighteen.toml", "depth = 18\ninit_from = \"resnet50.safetensors\"\n");
  const Result r = runner("run " + eighteen.string());
  EXPECT_EQ(r.code, 2) << r.err;
  const std::string first = r.err.substr(0, r.err.find('\n'));
  EXPECT_EQ(first.rfind("error: the weights in '" + weights.string() +
                            "' do not match the model: unexpected layer1.0.bn3.bias, ",
                        0),
            0u)
      << first;
  EXPECT_NE(first.find("; wrong shape: fc.weight [10, 2048] in the file, [10, 512] in the model"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("layer1.0.conv1.weight [64, 64, 1, 1] in the file, [64, 64, 3, 3] in the "
                       "model"),
            std::string::npos);
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM runs"), runs);
}

TEST_F(WeightsCliTest, ATrainedModelsWeightsLoadIntoTorchvisionStrictly) {
  RUNNER_REQUIRE_ORACLE("torch,torchvision,safetensors");
  const fs::path file =
      write("trained.toml",
            "[model]\nplugin = \"resnet\"\ndepth = 18\n\n[data]\nplugin = \"synthetic\"\n"
            "shape = [3, 32, 32]\nclasses = 10\nsize = 8\nbatch_size = 4\n\n[optimizer]\n"
            "plugin = \"sgd\"\nlr = 0.01\n\n[train]\nsteps = 2\nwarmup = 0\n"
            "save_to = \"saved/resnet18-{trial}-{repeat}.safetensors\"\n\n[eval]\nbatches = 1\n");
  const Result r = runner("run " + file.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path weights = dir_ / "saved" / "resnet18-1-0.safetensors";
  ASSERT_TRUE(fs::exists(weights));
  EXPECT_EQ(runner::test::query_text(db_, "SELECT sha256 FROM run_files WHERE role = 'save_to'"),
            runner::sha256_file_hex(weights));
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM evaluations WHERE step = 2"), 2);
  const auto check = runner::test::run_oracle("load_saved_resnet.py", {weights.string()});
  EXPECT_EQ(check.code, 0) << check.output;
  EXPECT_NE(check.output.find("loaded 122 tensors strictly"), std::string::npos) << check.output;
}

TEST_F(WeightsCliTest, AStateDictSavedByTorchSaveStartsARun) {
  // torch.save(model.state_dict(), path): the OrderedDict LibTorch's own
  // pickle_load refuses. The same weights as safetensors are the same trial.
  RUNNER_REQUIRE_ORACLE("torch,torchvision,safetensors");
  const auto written = runner::test::run_oracle("torch_files.py", {"resnet", dir_.string()});
  ASSERT_EQ(written.code, 0) << written.output;
  const std::string rest =
      "\n[data]\nplugin = \"synthetic\"\nshape = [3, 32, 32]\nclasses = 10\nsize = 4\n"
      "batch_size = 2\n\n[infer]\nbatches = 1\nwarmup = 0\n\n[eval]\nbatches = 1\n";
  const std::string model =
      "[experiment]\nkind = \"infer\"\n\n[model]\nplugin = \"resnet\"\nnum_classes = 1000\n";
  const fs::path pt = write("pt.toml", model + "init_from = \"resnet18.pt\"\n" + rest);
  const Result r = runner("run " + pt.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_text(db_, "SELECT sha256 FROM run_files WHERE role = 'init_from'"),
            runner::sha256_file_hex(dir_ / "resnet18.pt"));
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM evaluations WHERE step = 0"), 2);
  // Another file, another trial: the safetensors copy runs as a new one.
  const fs::path st =
      write("st.toml", model + "init_from = \"resnet18.safetensors\"\n" + rest);
  const Result again = runner("run " + st.string());
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(runner::test::query_int(db_, "SELECT count(DISTINCT trial_id) FROM runs"), 2);
  // Both evaluate the same weights on the same held-out batch.
  EXPECT_EQ(runner::test::query_int(
                db_, "SELECT count(DISTINCT printf('%.6e', value)) FROM evaluations WHERE "
                     "metric = 'loss'"),
            1);
}

}  // namespace
