// The data pipeline through the runner executable: [data] settings that
// cannot apply are refused at validation where the file writes them; a run
// with workers and augmentations records the pipeline's metrics; the file
// loaders' bad data exits 2 before any run, naming the file and record.
#include <gtest/gtest.h>

#include <fstream>

#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::Result;

class DataCliTest : public runner::test::CliTestBase {
 protected:
  DataCliTest() : CliTestBase("runner-data-cli-") {}

  // A convnet on synthetic uint8 images [3, 12, 12], with more [data] lines.
  fs::path experiment(const std::string& data, const std::string& shape = "[3, 12, 12]") const {
    return write("data.toml",
                 "[model]\nplugin = \"convnet\"\n\n[data]\nplugin = \"synthetic\"\nshape = " +
                     shape + "\nclasses = 4\nsize = 64\ndtype = \"uint8\"\nbatch_size = 8\n" +
                     data + "\n[optimizer]\nplugin = \"sgd\"\nlr = 0.05\n\n[train]\nsteps = 6\n"
                     "warmup = 1\n");
  }
};

TEST_F(DataCliTest, PinnedMemoryOnACpuRunIsRefused) {
  expect_refused(experiment("pin_memory = true\n"), "pin_memory = true",
                 "data.pin_memory needs a CUDA device; this run's device is cpu");
}

TEST_F(DataCliTest, NormalizationWithTheWrongNumberOfChannelsIsRefused) {
  expect_refused(experiment("normalize_mean = [0.5, 0.5]\nnormalize_std = [0.2, 0.2]\n"),
                 "normalize_mean = [0.5, 0.5]",
                 "data.normalize_mean has 2 values but the samples have 3 channels (shape [3, "
                 "12, 12])");
}

TEST_F(DataCliTest, ACropLargerThanThePaddedImageIsRefused) {
  expect_refused(experiment("random_crop = [15]\ncrop_padding = 1\n"), "random_crop = [15]",
                 "data.random_crop [15, 15] is larger than the padded samples [14, 14]");
}

TEST_F(DataCliTest, ImageAugmentationsOfFlatSamplesAreRefused) {
  expect_refused(experiment("hflip = 0.5\n", "[48]"), "hflip = 0.5",
                 "data.hflip needs image samples [channels, height, width]; the loader's samples "
                 "are [48]");
}

TEST_F(DataCliTest, ARunWithWorkersAndAugmentationsRecordsThePipelinesMetrics) {
  const fs::path file = experiment(
      "workers = 2\nprefetch = 3\nrandom_crop = [10]\ncrop_padding = 2\nhflip = 0.5\n"
      "normalize_mean = [0.5]\nnormalize_std = [0.25]\n");
  const Result r = runner::test::run_runner("run " + file.string(), dir_, {db_, {}});
  ASSERT_EQ(r.code, 0) << r.err;
  auto metric = [&](const std::string& name) {
    return runner::test::query_text(db_, "SELECT value FROM metrics WHERE name = '" + name + "'");
  };
  EXPECT_FALSE(metric("loader_samples_per_s").empty());
  const double busy = std::stod(metric("loader_busy_fraction"));
  EXPECT_GT(busy, 0.0);
  EXPECT_LE(busy, 1.0);
  EXPECT_TRUE(metric("skipped_samples").empty());  // on_error = "fail": not recorded
  // The model was built for the cropped samples: 10 x 10.
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
  EXPECT_GT(runner::test::query_int(db_, "SELECT count(*) FROM summaries WHERE metric = 'data'"), 0);
}

// A CIFAR-10 folder whose data_batch_3.bin is cut short by 5 bytes.
TEST_F(DataCliTest, ATruncatedDataFileIsRefusedBeforeAnyRunNamingTheFile) {
  std::string records(2 * 3073, '\1');
  fs::create_directories(dir_ / "cifar");
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"})
    write(std::string("cifar/") + name, records);
  const fs::path cut = write("cifar/data_batch_3.bin", records.substr(0, records.size() - 5));
  const fs::path file = write(
      "cifar.toml",
      "[model]\nplugin = \"convnet\"\n\n[data]\nplugin = \"cifar\"\npath = \"cifar\"\n"
      "batch_size = 2\n\n[optimizer]\nplugin = \"sgd\"\nlr = 0.05\n\n[train]\nsteps = 2\n");
  expect_refused(file, "plugin = \"cifar\"",
                 "loader plugin 'cifar': '" + cut.string() +
                     "' is truncated: 6141 bytes is not a whole number of 3073-byte records (1 "
                     "whole, 3068 bytes over)");
}

TEST_F(DataCliTest, AMissingDataFileIsReportedAtItsOption) {
  const fs::path file = write(
      "tokens.toml",
      "[model]\nplugin = \"transformer_lm\"\n\n[data]\nplugin = \"tokens\"\n"
      "path = \"corpus/tokens.bin\"\nvocab = 256\nseq_len = 16\nbatch_size = 2\n\n"
      "[optimizer]\nplugin = \"sgd\"\nlr = 0.05\n\n[train]\nsteps = 2\n");
  // Relative paths are the experiment file's folder's.
  expect_refused(file, "path = \"corpus/tokens.bin\"",
                 "'data.path' of data plugin 'tokens': cannot open '" +
                     (dir_ / "corpus" / "tokens.bin").string() + "': No such file or directory");
}

// An image folder (the oracle's, 4 images) whose JPEG bee/3.jpg is cut in
// half: under on_error = "skip" the run finishes and records how many samples
// it left out; under "fail" the run fails with the decoder's message.
TEST_F(DataCliTest, ACorruptImageIsSkippedAndCountedOrFailsTheRun) {
  RUNNER_REQUIRE_ORACLE("torch,torchvision,PIL");
  const auto made = runner::test::run_oracle("image_folder_reference.py", {"--out", (dir_ / "img").string()});
  ASSERT_EQ(made.code, 0) << made.output;
  const fs::path jpeg = dir_ / "img" / "train" / "bee" / "3.jpg";
  fs::resize_file(jpeg, fs::file_size(jpeg) / 2);
  auto experiment = [&](const std::string& on_error) {
    return write("img_" + on_error + ".toml",
                 "[experiment]\nrepeats = 1\n\n[model]\nplugin = \"convnet\"\n\n"
                 "[data]\nplugin = \"image_folder\"\npath = \"img/train\"\nbatch_size = 2\n"
                 "shuffle = false\non_error = \"" + on_error + "\"\n\n[optimizer]\nplugin = \"sgd\"\n"
                 "lr = 0.05\n\n[train]\nsteps = 4\nwarmup = 1\n");
  };
  // Four steps of two: two epochs, the corrupt image met twice.
  const Result skip = runner::test::run_runner("run " + experiment("skip").string(), dir_, {db_, {}});
  ASSERT_EQ(skip.code, 0) << skip.err;
  EXPECT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
  EXPECT_EQ(runner::test::query_text(db_, "SELECT value FROM metrics WHERE name = 'skipped_samples'"), "2.0");

  const fs::path failed_db = dir_ / "failed.db";
  const Result fail = runner::test::run_runner("run " + experiment("fail").string(), dir_, {failed_db, {}});
  EXPECT_EQ(fail.code, 1) << fail.err;
  EXPECT_EQ(runner::test::query_text(failed_db, "SELECT status FROM runs"), "failed");
  EXPECT_EQ(runner::test::query_text(failed_db, "SELECT error FROM runs"),
            "loader plugin 'image_folder': '" + jpeg.string() +
                "' is not a readable JPEG: Premature end of JPEG file");
}

}  // namespace
