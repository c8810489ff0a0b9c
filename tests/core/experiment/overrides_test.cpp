// Tests of --set overrides and of [experiment] timeout.
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

class OverridesTest : public test::ExperimentFixture {
 protected:
  Experiment load_with(const std::string& text, const std::vector<std::string>& sets,
                       const std::string& name = "exp.toml") {
    return resolve_experiment(*parse_experiment_file(write(text, name), sets), catalog_);
  }
  Error error_with(const std::string& text, const std::vector<std::string>& sets) {
    try {
      static_cast<void>(load_with(text, sets));
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error("(no error)");
  }
};

// --- --set -----------------------------------------------------------------------------

TEST_F(OverridesTest, SetReplacesAndAddsKeysWithTheFilesTypes) {
  const Experiment e = load_with(kMinimal + "[train]\nsteps = 5\n",
                                 {"train.steps=50", "model.activation=gelu",
                                  "model.hidden=[32, 32]", "optimizer.lr=1", "data.shuffle=false",
                                  "experiment.name=renamed", "experiment.repeats=3"});
  EXPECT_EQ(e.train.steps, 50);
  EXPECT_EQ(e.model.options.string("activation"), "gelu");  // not TOML: a plain string
  EXPECT_EQ(e.model.options.integers("hidden"), (std::vector<std::int64_t>{32, 32}));
  EXPECT_EQ(e.optimizer->options.number("lr"), 1.0);
  EXPECT_FALSE(e.data_settings.shuffle);
  EXPECT_EQ(e.name, "renamed");
  EXPECT_EQ(e.repeats, 3);
  EXPECT_EQ(e.source->set_overrides.size(), 7u);
  EXPECT_EQ(e.source->set_overrides[0], "train.steps=50");
}

TEST_F(OverridesTest, ValuesAreTomlFirst) {
  EXPECT_EQ(load_with(kMinimal, {"model.activation=\"tanh\""}).model.options.string("activation"),
            "tanh");
  EXPECT_EQ(load_with(kMinimal, {"model.activation='tanh'"}).model.options.string("activation"),
            "tanh");
  EXPECT_EQ(load_with(kMinimal, {"experiment.description=fp32 baseline, 2 threads"}).description,
            "fp32 baseline, 2 threads");
  EXPECT_EQ(load_with(kMinimal, {"experiment.description="}).description, "");
  EXPECT_EQ(load_with(kMinimal, {" train.steps = 8"}).train.steps, 8);
}

TEST_F(OverridesTest, LastSetWinsAndSetComesAfterExtends) {
  write(kMinimal + "[train]\nsteps = 5\n", "base.toml");
  const Experiment e = load_with("extends = \"base.toml\"\n[train]\nsteps = 6\n",
                                 {"train.steps=7", "train.steps=8"});
  EXPECT_EQ(e.train.steps, 8);
}

TEST_F(OverridesTest, SetCanAddASection) {
  const Experiment e = load_with("[experiment]\nkind = \"infer\"\n" + kModel,
                                 {"data.plugin=synthetic", "data.batch_size=4"});
  ASSERT_TRUE(e.data.has_value());
  EXPECT_EQ(e.data->plugin, "synthetic");
  EXPECT_EQ(e.data_settings.batch_size, 4);
  EXPECT_EQ(e.data->where.str(), "--set data.plugin=synthetic");
}

TEST_F(OverridesTest, SetGivesTheSameTrialAsTheFile) {
  const Experiment set = load_with(kMinimal, {"optimizer.lr=0.5", "train.warmup=3"}, "a.toml");
  const Experiment file = load(kModel + kData + "[optimizer]\nplugin = \"sgd\"\nlr = 0.5\n"
                               "[train]\nwarmup = 3\n", "b.toml");
  EXPECT_EQ(set.resolved_json(), file.resolved_json());
}

TEST_F(OverridesTest, SetAppliesToEveryTrial) {
  const auto trials = expand(kMinimal + "[sweep]\n\"train.warmup\" = [1, 2]\n", {"train.steps=3"});
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].experiment.train.steps, 3);
  EXPECT_EQ(trials[1].experiment.train.steps, 3);
  EXPECT_EQ(trials[1].label, "train.warmup=2");  // --set is not what varies
  // A [[trial]] that sets the key keeps its value; the others take the --set value.
  const auto mixed = expand(kMinimal + "[[trial]]\n\"train.steps\" = 9\n[[trial]]\n",
                            {"train.steps=3"});
  EXPECT_EQ(mixed[0].experiment.train.steps, 9);
  EXPECT_EQ(mixed[1].experiment.train.steps, 3);
}

TEST_F(OverridesTest, UnknownKey) {
  const Error e = error_with(kMinimal, {"train.stepz=5"});
  EXPECT_EQ(std::string(e.what()),
            "--set train.stepz=5: unknown key 'train.stepz'; did you mean 'train.steps'?");
  EXPECT_EQ(e.hint(), "keys of [train]: steps, warmup, precision, accumulate, clip_grad_norm, save_to");
  const Error section = error_with(kMinimal, {"trian.steps=5"});
  EXPECT_EQ(std::string(section.what()),
            "--set trian.steps=5: unknown key 'trian.steps'; did you mean 'train.steps'?");
  EXPECT_EQ(section.hint(),
            "a key is written section.key, e.g. train.steps; known sections: experiment, device, runtime, env, "
            "model, data, optimizer, train, schedule, infer, eval, profile, distributed, comm_hook, kernel, plugins");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"steps=5"})), Error,
                   "--set steps=5: unknown key 'steps'");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"sweep.train.steps=[1]"})), Error,
                   "--set sweep.train.steps=[1]: unknown key 'sweep.train.steps'");
}

TEST_F(OverridesTest, ErrorsQuoteTheArgumentEscaped) {
  // A raw ESC (or a line break) from the command line must not reach the
  // terminal: it could recolour or rewrite what the user reads.
  EXPECT_EQ(std::string(error_with(kMinimal, {"train.st\x1b[2Jeps=3"}).what()),
            "--set train.st\\e[2Jeps=3: unknown key 'train.st\\e[2Jeps'");
  EXPECT_EQ(std::string(error_with(kMinimal, {"train.steps=\x1b"}).what()),
            "--set train.steps=\\e: 'train.steps' must be an integer, found a string");
  EXPECT_EQ(std::string(error_with(kMinimal, {"a\nhint: b=1"}).what()),
            "--set a\\nhint: b=1: unknown key 'a\\nhint: b'");
}

TEST_F(OverridesTest, UnknownPluginOption) {
  const Error e = error_with(kMinimal, {"model.hiden=[8]"});
  EXPECT_EQ(std::string(e.what()),
            "--set model.hiden=[8]: unknown option 'hiden' for model plugin 'mlp'; did you mean "
            "'hidden'?");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe mlp' to see its options; [model] also "
                      "takes init_from, strict, check_against, check_tolerance, channels_last");
}

TEST_F(OverridesTest, TypeAndRangeAreCheckedAsInTheFile) {
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"train.steps=x"})), Error,
                   "--set train.steps=x: 'train.steps' must be an integer, found a string");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"train.steps=0"})), Error,
                   "--set train.steps=0: 'train.steps' must be between 1 and 1000000, found 0");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"optimizer.lr=fast"})), Error,
                   "--set optimizer.lr=fast: 'optimizer.lr' must be a number, found a string");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"model.hidden=[8, \"x\"]"})), Error,
                   "--set model.hidden=[8, \"x\"]: 'model.hidden[1]' must be an integer, found a "
                   "string");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"experiment.name=2024-01-01"})), Error,
                   "--set experiment.name=2024-01-01: 'experiment.name' must be a string, found a "
                   "date");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"infer.batches=3"})), Error,
                   "--set infer.batches=3: section [infer] is only used by infer experiments");
}

TEST_F(OverridesTest, MalformedSet) {
  const Error e = error_with(kMinimal, {"train.steps"});
  EXPECT_EQ(std::string(e.what()), "--set train.steps: expected key=value");
  EXPECT_EQ(e.hint(), "e.g. --set train.steps=50");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"=5"})), Error,
                   "--set =5: expected key=value");
  const Error quote = error_with(kMinimal, {"model.activation=\"gelu"});
  EXPECT_EQ(std::string(quote.what()),
            "--set model.activation=\"gelu: invalid TOML value: Error while parsing string: "
            "encountered end-of-file");
  EXPECT_EQ(quote.hint(),
            "the value is read as TOML (50, 0.1, true, [64, 64], \"text\"); a value that is not "
            "TOML and does not start with a quote or a bracket is taken as a string");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"model.hidden=[1, 2"})), Error,
                   "--set model.hidden=[1, 2: invalid TOML value: Error while parsing array: "
                   "encountered end-of-file");
}

TEST_F(OverridesTest, SetOfASweptKeyWouldNeverBeUsed) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"train.steps\" = [1, 2]\n", {"train.steps=5"});
  EXPECT_EQ(std::string(e.what()),
            "--set train.steps=5: 'train.steps' is swept in [sweep], so this value would never "
            "be used");
  EXPECT_EQ(e.hint(),
            "--set changes the configuration every trial starts from; remove 'train.steps' from "
            "[sweep] to fix its value");
  EXPECT_THROW_MSG(
      static_cast<void>(
          expand(kMinimal + "[[trial]]\n\"optimizer.lr\" = 0.2\n", {"optimizer.lr=0.3"})),
      Error,
      "--set optimizer.lr=0.3: every [[trial]] sets 'optimizer.lr', so this value would never be "
      "used");
}

TEST_F(OverridesTest, ErrorsOfTheFileStillPointAtTheFile) {
  EXPECT_THROW_MSG(static_cast<void>(load_with("[model]\nplugin = \"mlp\"\nhidden = [8]\n" + kData +
                                                   kOptimizer,
                                               {"model.plugin=resnet"})),
                   Error, at(3, 1) + "unknown option 'hidden' for model plugin 'resnet'");
}

TEST_F(OverridesTest, PluginPathFromSetIsRelativeToTheWorkingDirectory) {
  const auto parsed = parse_experiment_file(write(kMinimal), {"plugins.path=my-plugins"});
  EXPECT_EQ(plugin_paths_of(*parsed),
            (std::vector<std::filesystem::path>{std::filesystem::current_path() / "my-plugins"}));
}

// --- [experiment] timeout ---------------------------------------------------------------

TEST_F(OverridesTest, TimeoutDefaultAndForms) {
  EXPECT_EQ(load(kMinimal).timeout_s, 3600.0);
  auto timeout = [&](const std::string& value) {
    return load("[experiment]\ntimeout = " + value + "\n" + kMinimal).timeout_s;
  };
  EXPECT_EQ(timeout("\"90s\""), 90.0);
  EXPECT_EQ(timeout("\"30m\""), 1800.0);
  EXPECT_EQ(timeout("\"2h\""), 7200.0);
  EXPECT_EQ(timeout("\"1h30m\""), 5400.0);
  EXPECT_EQ(timeout("\"1500ms\""), 1.5);  // 500ms before the 1 s minimum (issue 30 item 4)
  EXPECT_EQ(timeout("\"1.5h\""), 5400.0);
  EXPECT_EQ(timeout("\"1m30s250ms\""), 90.25);
  EXPECT_EQ(timeout("45"), 45.0);
  EXPECT_EQ(timeout("2.5"), 2.5);
  EXPECT_EQ(load_with(kMinimal, {"experiment.timeout=2h"}).timeout_s, 7200.0);
}

TEST_F(OverridesTest, TimeoutThatIsNotAPositiveDuration) {
  const std::string expected =
      "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" from 1 to 2592000 seconds, found ";
  auto error = [&](const std::string& value) {
    return std::string(error_of("[experiment]\ntimeout = " + value + "\n" + kMinimal).what());
  };
  EXPECT_EQ(error("\"abc\""), at(2, 11) + expected + "\"abc\"");
  EXPECT_EQ(error("0"), at(2, 11) + expected + "0");
  EXPECT_EQ(error("-5"), at(2, 11) + expected + "-5");
  EXPECT_EQ(error("\"0s\""), at(2, 11) + expected + "\"0s\"");
  EXPECT_EQ(error("\"90\""), at(2, 11) + expected + "\"90\"");
  EXPECT_EQ(error("\"1h 30m\""), at(2, 11) + expected + "\"1h 30m\"");
  EXPECT_EQ(error("\"-1h\""), at(2, 11) + expected + "\"-1h\"");
  EXPECT_EQ(error("\"1.h\""), at(2, 11) + expected + "\"1.h\"");
  EXPECT_EQ(error("nan"), at(2, 11) + expected + "nan");
  EXPECT_EQ(error("true"), at(2, 11) + expected + "a boolean");
  EXPECT_THROW_MSG(static_cast<void>(load_with(kMinimal, {"experiment.timeout=abc"})), Error,
                   "--set experiment.timeout=abc: " + expected + "\"abc\"");
}

TEST_F(OverridesTest, TimeoutIsNotPartOfTheTrial) {
  EXPECT_EQ(load("[experiment]\ntimeout = \"5m\"\n" + kMinimal, "a.toml").config_hash(),
            load(kMinimal, "b.toml").config_hash());
  EXPECT_THROW_MSG(
      static_cast<void>(expand(kMinimal + "[sweep]\n\"experiment.timeout\" = [\"1h\"]\n")), Error,
      at(9, 1) + "'experiment.timeout' cannot vary between trials");
}

TEST_F(OverridesTest, WarmupTakesAStepCountOrAuto) {
  const Experiment automatic = load_with(kMinimal, {"train.warmup=auto"});
  EXPECT_EQ(automatic.train.warmup, -1);
  EXPECT_NE(automatic.resolved_json().find("\"warmup\":\"auto\""), std::string::npos);
  EXPECT_EQ(load_with(kMinimal, {"train.warmup=7"}).train.warmup, 7);
  EXPECT_EQ(std::string(error_with(kMinimal, {"train.warmup=sometimes"}).what()),
            "--set train.warmup=sometimes: 'train.warmup' must be a step count between 0 and 1000000 or "
            "\"auto\", found \"sometimes\"");
}

}  // namespace
}  // namespace runner
