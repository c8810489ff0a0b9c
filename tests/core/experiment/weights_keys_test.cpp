// [model] init_from / strict, [train] save_to and [eval]: paths resolved
// against the writing file, the weights' bytes (not their path) in the
// trial's identity, one save_to file per run, and the errors of each.
#include <sys/stat.h>

#include "experiment_fixture.hpp"
#include "runner/common/sha256.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

class WeightsKeysTest : public test::ExperimentFixture {
 protected:
  fs::path weights(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  const std::string kHint =
      "give a .safetensors file or a state dict saved with torch.save(model.state_dict(), "
      "path); a relative path is relative to the file that writes it";
};

TEST_F(WeightsKeysTest, InitFromIsResolvedAgainstTheFileAndHashed) {
  const fs::path file_path = weights("w/a.safetensors", "some bytes");
  const Experiment e = load("[model]\nplugin = \"mlp\"\ninit_from = \"w/a.safetensors\"\n" +
                            test::kData + test::kOptimizer);
  EXPECT_EQ(e.model_settings.init_from, file_path);
  EXPECT_EQ(e.model_settings.init_from_sha256, sha256_file_hex(file_path));
  EXPECT_TRUE(e.model_settings.strict);
  EXPECT_NE(e.resolved_json().find("\"init_from\":{\"sha256\":\"" + sha256_file_hex(file_path) +
                                   "\",\"strict\":true}"),
            std::string::npos)
      << e.resolved_json();
}

TEST_F(WeightsKeysTest, TheWeightsBytesNotTheirPathIdentifyTheTrial) {
  weights("a.pt", "same");
  weights("b/c.pt", "same");
  weights("d.pt", "other");
  const auto with = [&](const std::string& path, const std::string& more = "") {
    return load("[model]\nplugin = \"mlp\"\ninit_from = \"" + path + "\"\n" + more + test::kData +
                test::kOptimizer)
        .config_hash();
  };
  EXPECT_EQ(with("a.pt"), with("b/c.pt"));
  EXPECT_NE(with("a.pt"), with("d.pt"));
  EXPECT_NE(with("a.pt"), with("a.pt", "strict = false\n"));
  EXPECT_NE(with("a.pt"), load(test::kMinimal).config_hash());
}

TEST_F(WeightsKeysTest, InitFromThatIsNotAReadableFileIsAnInputError) {
  const std::string head = "[model]\nplugin = \"mlp\"\ninit_from = ";
  Error missing = error_of(head + "\"nope.safetensors\"\n" + test::kData + test::kOptimizer);
  EXPECT_EQ(std::string(missing.what()),
            at(3, 13) + "model.init_from names '" + (dir_ / "nope.safetensors").string() +
                "', which does not exist");
  EXPECT_EQ(missing.hint(), kHint);
  fs::create_directories(dir_ / "folder");
  EXPECT_THROW_MSG(load(head + "\"folder\"\n" + test::kData + test::kOptimizer), Error,
                   at(3, 13) + "model.init_from names '" + (dir_ / "folder").string() +
                       "', which is a directory");
  // A FIFO is refused without being opened (reading it would wait forever).
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_THROW_MSG(load(head + "\"fifo\"\n" + test::kData + test::kOptimizer), Error,
                   at(3, 13) + "model.init_from names '" + (dir_ / "fifo").string() +
                       "', which is not a regular file");
  EXPECT_THROW_MSG(load(head + "\"\"\n" + test::kData + test::kOptimizer), Error,
                   at(3, 13) + "'model.init_from' must not be empty");
  EXPECT_THROW_MSG(load(head + "3\n" + test::kData + test::kOptimizer), Error,
                   at(3, 13) + "'model.init_from' must be a string, found an integer");
}

TEST_F(WeightsKeysTest, SaveToNeedsTrialAndRepeatWhenSeveralRunsWouldWriteIt) {
  const std::string base = test::kMinimal + "[train]\nsteps = 2\n";
  const Experiment one = load(base + "save_to = \"out/w.safetensors\"\n");
  EXPECT_EQ(one.train.save_to, (dir_ / "out/w.safetensors").string());
  EXPECT_EQ(one.save_path(0), dir_ / "out/w.safetensors");

  const Error repeats =
      expand_error("[experiment]\nrepeats = 3\n" + base + "save_to = \"w-{trial}.safetensors\"\n");
  EXPECT_EQ(std::string(repeats.what()),
            at(12, 11) + "'train.save_to' names one file for 1 trial(s) x 3 repetition(s): "
                         "every run would overwrite it");
  EXPECT_EQ(repeats.hint(),
            "put {repeat} in the name, e.g. save_to = \"weights-{trial}-{repeat}.safetensors\"");
  const Error both = expand_error("[experiment]\nrepeats = 2\n" + base +
                                  "save_to = \"w.safetensors\"\n[sweep]\noptimizer.lr = [0.1, 0.2]\n");
  EXPECT_EQ(std::string(both.what()),
            at(12, 11) + "'train.save_to' names one file for 2 trial(s) x 2 repetition(s): "
                         "every run would overwrite it");
  EXPECT_EQ(both.hint(), "put {trial} and {repeat} in the name, e.g. save_to = "
                         "\"weights-{trial}-{repeat}.safetensors\"");

  const auto trials = expand("[experiment]\nrepeats = 2\n" + base +
                             "save_to = \"w-{trial}-{repeat}.safetensors\"\n[sweep]\n"
                             "optimizer.lr = [0.1, 0.2]\n");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].experiment.save_path(1), dir_ / "w-2-1.safetensors");
  EXPECT_EQ(trials[0].experiment.save_path(0), dir_ / "w-1-0.safetensors");
  // Where the weights go does not change what the trial measures.
  EXPECT_EQ(load(base + "save_to = \"w.safetensors\"\n").config_hash(), load(base).config_hash());
}

TEST_F(WeightsKeysTest, EvalSectionIsReadAndJoinsTheIdentity) {
  const Experiment none = load(test::kMinimal);
  EXPECT_FALSE(none.eval.enabled);
  const Experiment e = load(test::kMinimal + "[eval]\nevery = 50\nbatches = 4\n");
  EXPECT_TRUE(e.eval.enabled);
  EXPECT_EQ(e.eval.every, 50);
  EXPECT_EQ(e.eval.batches, 4);
  const Experiment defaults = load(test::kMinimal + "[eval]\n");
  EXPECT_EQ(defaults.eval.every, 0);
  EXPECT_EQ(defaults.eval.batches, 10);
  EXPECT_NE(defaults.config_hash(), none.config_hash());
  EXPECT_NE(defaults.config_hash(), e.config_hash());
  EXPECT_THROW_MSG(load(test::kMinimal + "[eval]\nbatches = 0\n"), Error,
                   at(9, 11) + "'eval.batches' must be between 1 and 1000000, found 0");
  const Error unknown = error_of(test::kMinimal + "[eval]\nevry = 3\n");
  EXPECT_EQ(std::string(unknown.what()),
            at(9, 1) + "unknown key 'evry' in [eval]; did you mean 'every'?");
  EXPECT_EQ(unknown.hint(), "keys of [eval]: every, batches");
}

}  // namespace
}  // namespace runner
