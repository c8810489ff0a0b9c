// The [data] keys of the data pipeline: workers, prefetch, pin_memory,
// on_error, shuffle_buffer and the augmentations. Values, identity (earlier
// trials keep their hashes), errors at file:line:col; and loader options
// that name files, resolved against the experiment file's folder.
#include "experiment_fixture.hpp"

namespace runner {
namespace {

class DataKeysTest : public test::ExperimentFixture {};

TEST_F(DataKeysTest, DefaultsChangeNothingInTheIdentity) {
  const Experiment plain = load(test::kMinimal);
  EXPECT_EQ(plain.data_settings.workers, 0);
  EXPECT_EQ(plain.data_settings.prefetch, 2);
  EXPECT_FALSE(plain.data_settings.pin_memory);
  EXPECT_EQ(plain.data_settings.on_error, "fail");
  EXPECT_FALSE(plain.data_settings.augment.any());
  const Experiment spelled =
      load(test::kModel + test::kData +
           "workers = 0\nprefetch = 2\npin_memory = false\non_error = \"fail\"\n"
           "shuffle_buffer = 1024\ncrop_padding = 0\nhflip = 0.0\n" +
           test::kOptimizer);
  EXPECT_EQ(spelled.config_hash(), plain.config_hash());
  EXPECT_EQ(plain.resolved_json().find("workers"), std::string::npos);
}

TEST_F(DataKeysTest, ValuesReachTheExperimentAndEachJoinsTheIdentity) {
  const Experiment e = load(test::kModel + test::kData +
                            "workers = 3\nprefetch = 4\non_error = \"skip\"\nshuffle_buffer = 64\n"
                            "resize = [40]\ncenter_crop = [36, 34]\nrandom_crop = [32]\n"
                            "crop_padding = 4\nhflip = 0.5\nnormalize_mean = [0.5, 0.4, 0.3]\n"
                            "normalize_std = [0.2, 0.2, 0.25]\n" +
                            test::kOptimizer);
  const DataSettings& d = e.data_settings;
  EXPECT_EQ(d.workers, 3);
  EXPECT_EQ(d.prefetch, 4);
  EXPECT_EQ(d.on_error, "skip");
  EXPECT_EQ(d.shuffle_buffer, 64);
  EXPECT_EQ(d.augment.resize, (std::vector<std::int64_t>{40}));
  EXPECT_EQ(d.augment.center_crop, (std::vector<std::int64_t>{36, 34}));
  EXPECT_EQ(d.augment.random_crop, (std::vector<std::int64_t>{32}));
  EXPECT_EQ(d.augment.crop_padding, 4);
  EXPECT_EQ(d.augment.hflip, 0.5);
  EXPECT_EQ(d.augment.normalize_mean, (std::vector<double>{0.5, 0.4, 0.3}));
  EXPECT_EQ(d.augment.normalize_std, (std::vector<double>{0.2, 0.2, 0.25}));

  const std::string plain = load(test::kMinimal).config_hash();
  std::vector<std::string> hashes{plain};
  for (const char* key :
       {"workers = 2", "pin_memory = true", "on_error = \"skip\"", "shuffle_buffer = 10",
        "resize = [8]", "center_crop = [8]", "random_crop = [8]", "crop_padding = 1",
        "hflip = 0.5", "normalize_mean = [0.5]\nnormalize_std = [0.5]"}) {
    hashes.push_back(load(test::kModel + test::kData + key + "\n" + test::kOptimizer).config_hash());
    for (std::size_t i = 0; i + 1 < hashes.size(); ++i) EXPECT_NE(hashes[i], hashes.back()) << key;
  }
  // prefetch matters only with workers.
  EXPECT_EQ(load(test::kModel + test::kData + "prefetch = 5\n" + test::kOptimizer).config_hash(),
            plain);
}

TEST_F(DataKeysTest, BadValuesAreRefusedWhereTheyAreWritten) {
  const std::string head = test::kModel + test::kData;  // [data] is line 3
  EXPECT_THROW_MSG(load(head + "workers = 65\n"), Error,
                   at(5, 11) + "'data.workers' must be between 0 and 64, found 65");
  EXPECT_THROW_MSG(load(head + "prefetch = 0\n"), Error,
                   at(5, 12) + "'data.prefetch' must be between 1 and 64, found 0");
  EXPECT_THROW_MSG(load(head + "on_error = \"ignore\"\n"), Error,
                   at(5, 12) + "'data.on_error' must be one of \"fail\", \"skip\", found \"ignore\"");
  EXPECT_THROW_MSG(load(head + "hflip = 1.5\n"), Error,
                   at(5, 9) + "'data.hflip' must be between 0 and 1, found 1.5");
  EXPECT_THROW_MSG(load(head + "resize = [1, 2, 3]\n"), Error,
                   at(5, 10) + "'data.resize' must have between 1 and 2 items, found 3");
  EXPECT_THROW_MSG(load(head + "random_crop = [0]\n"), Error,
                   at(5, 16) + "'data.random_crop[0]' must be between 1 and 16384, found 0");
}

TEST_F(DataKeysTest, PathOptionsAreResolvedAgainstTheExperimentFile) {
  const Experiment e =
      load(test::kModel +
           "[data]\nplugin = \"files\"\npath = \"data/cifar\"\nextra = [\"a.bin\", \"/abs/b.bin\"]\n"
           "name = \"data/cifar\"\n" +
           test::kOptimizer);
  const auto& options = e.data->options;
  EXPECT_EQ(options.string("path"), (std::filesystem::path(file()).parent_path() / "data/cifar").string());
  const std::vector<std::string> extra{(std::filesystem::path(file()).parent_path() / "a.bin").string(),
                                       "/abs/b.bin"};
  EXPECT_EQ(options.strings("extra"), extra);
  EXPECT_EQ(options.string("name"), "data/cifar");  // not a path: as written
}

}  // namespace
}  // namespace runner
