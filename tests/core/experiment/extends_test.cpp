// Tests of `extends`: how base files merge into the file that extends them,
// and how errors in a chain of files say where they are.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiment_fixture.hpp"

namespace runner {
namespace {

using test::kData;
using test::kMinimal;
using test::kModel;
using test::kOptimizer;

class ExtendsTest : public test::ExperimentFixture {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
};

const std::string kBase =
    "[experiment]\nname = \"base\"\ndescription = \"the base\"\nseed = 4\n"
    "[model]\nplugin = \"mlp\"\nhidden = [64, 64]\nactivation = \"gelu\"\n"
    "[data]\nplugin = \"synthetic\"\nsize = 100\n"
    "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n"
    "[train]\nsteps = 50\nwarmup = 5\n";

// --- merging -------------------------------------------------------------------------

TEST_F(ExtendsTest, TablesMergeKeyByKeyAndArraysAreReplacedWhole) {
  write(kBase, "base.toml");
  const Experiment e = load(
      "extends = \"base.toml\"\n"
      "[model]\nhidden = [8]\n"
      "[train]\nsteps = 7\n");
  EXPECT_EQ(e.model.plugin, "mlp");
  EXPECT_EQ(e.model.options.integers("hidden"), (std::vector<std::int64_t>{8}));
  EXPECT_EQ(e.model.options.string("activation"), "gelu");
  EXPECT_EQ(e.data->options.integer("size"), 100);
  EXPECT_EQ(e.optimizer->options.number("momentum"), 0.9);
  EXPECT_EQ(e.train.steps, 7);
  EXPECT_EQ(e.train.warmup, 5);
  EXPECT_EQ(e.seed, 4);
  // name and description describe the file that writes them: not inherited.
  EXPECT_EQ(e.name, "exp");
  EXPECT_EQ(e.description, "");
  ASSERT_EQ(e.source->base_files.size(), 1u);
  EXPECT_EQ(e.source->base_files[0].path, dir_ / "base.toml");
  EXPECT_EQ(e.source->base_files[0].text, kBase);
  EXPECT_EQ(e.source->path, dir_ / "exp.toml");
}

TEST_F(ExtendsTest, MergedFileIsTheSameTrialAsTheFileWrittenOut) {
  write(kBase, "base.toml");
  const Experiment merged = load("extends = \"base.toml\"\n[optimizer]\nlr = 0.3\n");
  const Experiment plain = load(
      "[experiment]\nseed = 4\n"
      "[model]\nplugin = \"mlp\"\nhidden = [64, 64]\nactivation = \"gelu\"\n"
      "[data]\nplugin = \"synthetic\"\nsize = 100\n"
      "[optimizer]\nplugin = \"sgd\"\nlr = 0.3\nmomentum = 0.9\n"
      "[train]\nsteps = 50\nwarmup = 5\n",
      "plain.toml");
  EXPECT_EQ(merged.resolved_json(), plain.resolved_json());
}

TEST_F(ExtendsTest, ChangingThePluginKeepsTheBasesOptions) {
  // The plugin is one more key: the base's options stay and must suit the new plugin.
  write(kBase, "base.toml");
  EXPECT_THROW_MSG(
      static_cast<void>(load("extends = \"base.toml\"\n[model]\nplugin = \"resnet\"\n")), Error,
      at("base.toml", 7, 1) + "unknown option 'hidden' for model plugin 'resnet' (extended by " +
          file() + ")");
}

TEST_F(ExtendsTest, MultiLevelPathsAreRelativeToTheNamingFile) {
  write(kBase, "base.toml");
  write("extends = \"../base.toml\"\n[train]\nsteps = 9\nwarmup = 1\n[plugins]\npath = \"lib\"\n",
        "common/mid.toml");
  const Experiment e = load("extends = \"common/mid.toml\"\n[train]\nwarmup = 2\n");
  EXPECT_EQ(e.train.steps, 9);   // from mid
  EXPECT_EQ(e.train.warmup, 2);  // from exp
  EXPECT_EQ(e.seed, 4);          // from base
  // A relative plugin path belongs to the file that writes it.
  EXPECT_EQ(e.plugin_paths, (std::vector<std::filesystem::path>{dir_ / "common" / "lib"}));
  ASSERT_EQ(e.source->base_files.size(), 2u);
  EXPECT_EQ(e.source->base_files[0].path, dir_ / "common" / "mid.toml");
  EXPECT_EQ(e.source->base_files[1].path, dir_ / "base.toml");
}

TEST_F(ExtendsTest, ListOfBasesAppliesInOrder) {
  write(kBase, "a.toml");
  write("[train]\nsteps = 11\n[optimizer]\nlr = 0.2\n", "b.toml");
  const Experiment e = load("extends = [\"a.toml\", \"b.toml\"]\n[optimizer]\nmomentum = 0.5\n");
  EXPECT_EQ(e.train.steps, 11);
  EXPECT_EQ(e.train.warmup, 5);
  EXPECT_EQ(e.optimizer->options.number("lr"), 0.2);
  EXPECT_EQ(e.optimizer->options.number("momentum"), 0.5);
  EXPECT_EQ(e.model.options.string("activation"), "gelu");
}

TEST_F(ExtendsTest, SweepAxesMergeByKeyAndTrialsAreReplacedWhole) {
  write(kBase +
            "[[trial]]\n\"optimizer.lr\" = 0.5\n"
            "[[trial]]\n\"optimizer.lr\" = 0.6\n"
            "[sweep]\n\"train.steps\" = [1, 2]\n\"train.warmup\" = [0, 1]\n",
        "base.toml");
  const auto trials = expand(
      "extends = \"base.toml\"\n"
      "[[trial]]\n\"model.activation\" = \"tanh\"\n"
      "[sweep]\n\"data.batch_size\" = [8]\n\"train.steps\" = [3]\n");
  std::vector<std::string> labels;
  for (const auto& t : trials) labels.push_back(t.label);
  // One trial (replaced), train.steps replaced in its place, data.batch_size appended.
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "model.activation=\"tanh\" train.steps=3 train.warmup=0 data.batch_size=8",
                        "model.activation=\"tanh\" train.steps=3 train.warmup=1 "
                        "data.batch_size=8"}));
}

TEST_F(ExtendsTest, AZipGroupReplacesTheBaseAxesItShares) {
  write(kBase + "[sweep]\n\"optimizer.lr\" = [0.1, 0.2]\n\"train.steps\" = [1]\n", "base.toml");
  const auto trials = expand(
      "extends = \"base.toml\"\n"
      "[sweep.zip.opt]\n\"optimizer.lr\" = [0.3, 0.4]\n\"optimizer.momentum\" = [0.5, 0.6]\n");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].label, "optimizer.lr=0.4 optimizer.momentum=0.6 train.steps=1");
}

// --- errors ----------------------------------------------------------------------------

TEST_F(ExtendsTest, Cycle) {
  write("extends = \"b.toml\"\n" + kMinimal, "a.toml");
  write("extends = \"a.toml\"\n", "b.toml");
  try {
    static_cast<void>(parse_experiment_file(dir_ / "a.toml"));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), at("b.toml", 1, 11) + "extends cycle: " + path("a.toml") +
                                         " -> " + path("b.toml") + " -> " + path("a.toml"));
    EXPECT_EQ(e.hint(), "an experiment cannot extend itself, directly or through other files");
    EXPECT_EQ(e.exit_code(), 2);
  }
  // Itself, spelled differently.
  write("extends = [\"./self.toml\"]\n" + kMinimal, "self.toml");
  EXPECT_THROW_MSG(static_cast<void>(parse_experiment_file(dir_ / "self.toml")), Error,
                   at("self.toml", 1, 12) + "extends cycle: " + path("self.toml") + " -> " +
                       path("self.toml"));
}

TEST_F(ExtendsTest, ADiamondIsNotACycle) {
  write(kBase, "base.toml");
  write("extends = \"base.toml\"\n[train]\nsteps = 1\n", "a.toml");
  write("extends = \"base.toml\"\n[train]\nwarmup = 2\n", "b.toml");
  // b's copy of base comes after a: base's steps (50) win over a's, as documented.
  const Experiment e = load("extends = [\"a.toml\", \"b.toml\"]\n");
  EXPECT_EQ(e.train.steps, 50);
  EXPECT_EQ(e.train.warmup, 2);
}

TEST_F(ExtendsTest, MissingFile) {
  const Error e = error_of("extends = \"nope.toml\"\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()), at(1, 11) +
                                       "cannot open extended file 'nope.toml' (resolved to " +
                                       path("nope.toml") + "): No such file or directory");
  EXPECT_EQ(e.hint(), "a path in extends is relative to the folder of the file that names it");
}

TEST_F(ExtendsTest, MissingFileDeeperInTheChain) {
  write("extends = \"gone/base.toml\"\n", "mid.toml");
  EXPECT_THROW_MSG(static_cast<void>(load("extends = \"mid.toml\"\n" + kMinimal)), Error,
                   at("mid.toml", 1, 11) +
                       "cannot open extended file 'gone/base.toml' (resolved to " +
                       path("gone/base.toml") + "): No such file or directory (extended by " +
                       file() + ")");
}

TEST_F(ExtendsTest, ErrorInsideAnExtendedFileNamesTheChain) {
  write("[train]\nwarmup = 1\nsteps = 0\n", "base.toml");
  const Error e = error_of("extends = \"base.toml\"\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()), at("base.toml", 3, 9) +
                                       "'train.steps' must be between 1 and 1000000, found 0 (extended by " +
                                       file() + ")");
  write("extends = \"base.toml\"\n", "mid.toml");
  EXPECT_THROW_MSG(static_cast<void>(load("extends = \"mid.toml\"\n" + kMinimal)), Error,
                   at("base.toml", 3, 9) + "'train.steps' must be between 1 and 1000000, found 0 (extended by " +
                       path("mid.toml") + ", extended by " + file() + ")");
  // Overridden by the extending file, the base's value is never checked.
  EXPECT_EQ(load("extends = \"base.toml\"\n" + kMinimal + "[train]\nsteps = 3\n").train.steps, 3);
}

TEST_F(ExtendsTest, SyntaxAndStructureErrorsInAnExtendedFile) {
  write("[train]\nsteps = \n", "base.toml");
  EXPECT_THROW_MSG(static_cast<void>(load("extends = \"base.toml\"\n" + kMinimal)), Error,
                   at("base.toml", 2, 9) +
                       "invalid TOML: Error while parsing key-value pair: expected value, saw "
                       "'\\n' (extended by " + file() + ")");
  write("[modl]\n", "base.toml");
  EXPECT_THROW_MSG(static_cast<void>(load("extends = \"base.toml\"\n" + kMinimal)), Error,
                   at("base.toml", 1, 1) +
                       "unknown section [modl]; did you mean [model]? (extended by " + file() +
                       ")");
}

TEST_F(ExtendsTest, ExtendsOfTheWrongType) {
  EXPECT_THROW_MSG(static_cast<void>(load("extends = 3\n" + kMinimal)), Error,
                   at(1, 11) + "'extends' must be a string or a list of strings, found an integer");
  EXPECT_THROW_MSG(static_cast<void>(load("extends = [\"a.toml\", 1]\n" + kMinimal)), Error,
                   at(1, 22) + "'extends[1]' must be a string, found an integer");
  EXPECT_THROW_MSG(static_cast<void>(load("extends = \"\"\n" + kMinimal)), Error,
                   at(1, 11) + "'extends' must not be empty");
  // Only at the top of a file.
  EXPECT_THROW_MSG(
      static_cast<void>(load("[experiment]\nextends = \"a.toml\"\n" + kMinimal)), Error,
      at(2, 1) + "unknown key 'extends' in [experiment]");
}

}  // namespace
}  // namespace runner
