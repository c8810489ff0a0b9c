// The data pipeline through the runner executable: [data] settings that
// cannot apply are refused at validation where the file writes them; a run
// with workers and augmentations records the pipeline's metrics; the file
// loaders' bad data exits 2 before any run, naming the file and record.
#include <gtest/gtest.h>

#include <fstream>

#include "support/cli_harness.hpp"

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

}  // namespace
