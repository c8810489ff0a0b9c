// Tests of [sweep] and [[trial]]: how an experiment expands into trials (size,
// order, labels), how every trial is validated against its own plugins, and
// that a swept trial is the same trial as the equivalent plain file.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "experiment_fixture.hpp"

namespace runner {
namespace {

using test::kData;
using test::kMinimal;
using test::kModel;
using test::kOptimizer;

class SweepTest : public test::ExperimentFixture {
 protected:
  static std::vector<std::string> labels(const std::vector<Trial>& trials) {
    std::vector<std::string> out;
    for (const auto& trial : trials) out.push_back(trial.label);
    return out;
  }
};

using Varied = std::vector<std::pair<std::string, std::string>>;

// --- expansion -------------------------------------------------------------------

TEST_F(SweepTest, NoSweepIsOneTrialWithAnEmptyLabel) {
  const auto trials = expand(kMinimal);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].index, 0);
  EXPECT_EQ(trials[0].label, "");
  EXPECT_TRUE(trials[0].varied.empty());
  EXPECT_EQ(trials[0].experiment.resolved_json(), load(kMinimal).resolved_json());
  EXPECT_EQ(trial_count(*parse_experiment_file(dir_ / "exp.toml")), 1);
}

TEST_F(SweepTest, ProductInFileOrderLastAxisFastest) {
  const auto trials = expand(kMinimal +
                             "[sweep]\n"
                             "\"train.warmup\" = [0, 10]\n"
                             "\"data.batch_size\" = [32, 64]\n");
  EXPECT_EQ(labels(trials),
            (std::vector<std::string>{"train.warmup=0 data.batch_size=32",
                                      "train.warmup=0 data.batch_size=64",
                                      "train.warmup=10 data.batch_size=32",
                                      "train.warmup=10 data.batch_size=64"}));
  for (std::size_t i = 0; i < trials.size(); ++i)
    EXPECT_EQ(trials[i].index, static_cast<std::int64_t>(i));
  EXPECT_EQ(trials[1].varied, (Varied{{"train.warmup", "0"}, {"data.batch_size", "64"}}));
  EXPECT_EQ(trials[2].experiment.train.warmup, 10);
  EXPECT_EQ(trials[2].experiment.data_settings.batch_size, 32);
  EXPECT_EQ(trials[1].experiment.train.warmup, 0);
  EXPECT_EQ(trials[1].experiment.data_settings.batch_size, 64);
  EXPECT_EQ(trial_count(*parse_experiment_file(dir_ / "exp.toml")), 4);
}

TEST_F(SweepTest, AxisOrderIsFileOrderNotKeyOrder) {
  // toml++ sorts keys; "z" before "a" in the file must stay first.
  const auto trials = expand(kMinimal +
                             "[sweep]\n"
                             "\"train.steps\" = [1, 2]\n"
                             "\"experiment.seed\" = [5, 6]\n"
                             "\"device.threads\" = [1]\n");
  EXPECT_EQ(trials[1].label, "train.steps=1 experiment.seed=6 device.threads=1");
  EXPECT_EQ(trials[1].experiment.seed, 6);
}

TEST_F(SweepTest, NestedKeysAreDottedKeys) {
  const auto quoted = expand(kMinimal + "[sweep]\n\"train.steps\" = [1, 2]\n", {}, "a.toml");
  const auto nested = expand(kMinimal + "[sweep]\ntrain.steps = [1, 2]\n", {}, "b.toml");
  const auto table = expand(kMinimal + "[sweep.train]\nsteps = [1, 2]\n", {}, "c.toml");
  EXPECT_EQ(labels(quoted), (std::vector<std::string>{"train.steps=1", "train.steps=2"}));
  EXPECT_EQ(labels(nested), labels(quoted));
  EXPECT_EQ(labels(table), labels(quoted));
  EXPECT_EQ(nested[1].experiment.config_hash(), quoted[1].experiment.config_hash());
}

TEST_F(SweepTest, PluginOptionsAndListValues) {
  const auto trials = expand(kModel + kData +
                             "[optimizer]\nplugin = \"sgd\"\n"
                             "[sweep]\n"
                             "\"model.hidden\" = [[64], [128, 128]]\n"
                             "\"optimizer.lr\" = [0.1, 1]\n");
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[3].label, "model.hidden=[128, 128] optimizer.lr=1");
  EXPECT_EQ(trials[3].varied, (Varied{{"model.hidden", "[128, 128]"}, {"optimizer.lr", "1"}}));
  EXPECT_EQ(trials[3].experiment.model.options.integers("hidden"),
            (std::vector<std::int64_t>{128, 128}));
  // A required option (sgd's lr) may come from the sweep alone; integers become numbers.
  EXPECT_EQ(trials[3].experiment.optimizer->options.number("lr"), 1.0);
  EXPECT_EQ(trials[0].experiment.optimizer->options.number("lr"), 0.1);
}

TEST_F(SweepTest, StringsAreQuotedInLabels) {
  const auto trials = expand(kMinimal + "[sweep]\n\"model.activation\" = [\"gelu\", \"tanh\"]\n");
  EXPECT_EQ(trials[0].label, "model.activation=\"gelu\"");
  EXPECT_EQ(trials[1].experiment.model.options.string("activation"), "tanh");
}

TEST_F(SweepTest, EachTrialIsValidatedAgainstItsOwnPlugin) {
  const auto trials = expand("[model]\nplugin = \"mlp\"\n" + kData + kOptimizer +
                             "[sweep]\n\"model.plugin\" = [\"mlp\", \"resnet\"]\n");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].experiment.model.plugin, "mlp");
  EXPECT_TRUE(trials[0].experiment.model.options.has("hidden"));
  EXPECT_EQ(trials[1].experiment.model.plugin, "resnet");
  EXPECT_EQ(trials[1].experiment.model.options.integer("depth"), 18);
  EXPECT_FALSE(trials[1].experiment.model.options.has("hidden"));
  EXPECT_EQ(trials[1].experiment.model.where.str(), file() + ":9:26");
}

TEST_F(SweepTest, APluginMayComeFromTheSweepAlone) {
  const std::string text =
      kData + kOptimizer + "[sweep]\n\"model.plugin\" = [\"mlp\", \"resnet\"]\n";
  const auto trials = expand(text);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].experiment.model.plugin, "resnet");
  // Without the sweep, the base configuration has no model.
  EXPECT_THROW_MSG(static_cast<void>(resolve_experiment(*parse_experiment_file(dir_ / "exp.toml"),
                                                        catalog_)),
                   Error, file() + ": missing section [model]");
}

TEST_F(SweepTest, ResolveExperimentIsTheBaseWithoutTheSweep) {
  const auto parsed = parse_experiment_file(
      write(kMinimal + "[train]\nsteps = 7\n[sweep]\n\"train.steps\" = [1, 2]\n"));
  EXPECT_EQ(resolve_experiment(*parsed, catalog_).train.steps, 7);
  EXPECT_EQ(trial_count(*parsed), 2);
}

TEST_F(SweepTest, ZipGroupIsOneAxisAtThePlaceOfItsTable) {
  const auto trials = expand(kModel + kData +
                             "[optimizer]\nplugin = \"sgd\"\n"
                             "[sweep]\n"
                             "\"train.steps\" = [10, 20]\n"
                             "[sweep.zip.opt]\n"
                             "\"optimizer.lr\" = [0.1, 0.2, 0.3]\n"
                             "\"optimizer.momentum\" = [0.9, 0.8, 0.7]\n");
  EXPECT_EQ(labels(trials),
            (std::vector<std::string>{
                "train.steps=10 optimizer.lr=0.1 optimizer.momentum=0.9",
                "train.steps=10 optimizer.lr=0.2 optimizer.momentum=0.8",
                "train.steps=10 optimizer.lr=0.3 optimizer.momentum=0.7",
                "train.steps=20 optimizer.lr=0.1 optimizer.momentum=0.9",
                "train.steps=20 optimizer.lr=0.2 optimizer.momentum=0.8",
                "train.steps=20 optimizer.lr=0.3 optimizer.momentum=0.7"}));
  EXPECT_EQ(trials[4].experiment.optimizer->options.number("momentum"), 0.8);

  // Written before the plain axis (inline), the group varies slowest.
  const auto first = expand(kModel + kData +
                                "[optimizer]\nplugin = \"sgd\"\n"
                                "[sweep]\n"
                                "zip.opt = { \"optimizer.lr\" = [0.1, 0.2], "
                                "\"optimizer.momentum\" = [0.9, 0.8] }\n"
                                "\"train.steps\" = [10, 20]\n",
                            {}, "inline.toml");
  EXPECT_EQ(labels(first),
            (std::vector<std::string>{"optimizer.lr=0.1 optimizer.momentum=0.9 train.steps=10",
                                      "optimizer.lr=0.1 optimizer.momentum=0.9 train.steps=20",
                                      "optimizer.lr=0.2 optimizer.momentum=0.8 train.steps=10",
                                      "optimizer.lr=0.2 optimizer.momentum=0.8 train.steps=20"}));
}

TEST_F(SweepTest, TrialListAlone) {
  const auto trials = expand(kMinimal +
                             "[[trial]]\n"
                             "[[trial]]\n"
                             "optimizer.lr = 0.5\n"
                             "\"train.steps\" = 3\n"
                             "[[trial]]\n"
                             "\"model.plugin\" = \"resnet\"\n");
  EXPECT_EQ(labels(trials), (std::vector<std::string>{"", "optimizer.lr=0.5 train.steps=3",
                                                      "model.plugin=\"resnet\""}));
  EXPECT_EQ(trials[0].experiment.resolved_json(), load(kMinimal, "plain.toml").resolved_json());
  EXPECT_EQ(trials[1].experiment.optimizer->options.number("lr"), 0.5);
  EXPECT_EQ(trials[1].experiment.train.steps, 3);
  EXPECT_EQ(trials[2].experiment.model.plugin, "resnet");
}

TEST_F(SweepTest, TrialsTimesSweepTrialsOutermost) {
  const auto trials = expand(kMinimal +
                             "[[trial]]\n\"model.plugin\" = \"resnet\"\n"
                             "[[trial]]\n\"optimizer.lr\" = 0.5\n"
                             "[sweep]\n\"data.batch_size\" = [8, 16]\n");
  EXPECT_EQ(labels(trials),
            (std::vector<std::string>{"model.plugin=\"resnet\" data.batch_size=8",
                                      "model.plugin=\"resnet\" data.batch_size=16",
                                      "optimizer.lr=0.5 data.batch_size=8",
                                      "optimizer.lr=0.5 data.batch_size=16"}));
  EXPECT_EQ(trials[3].index, 3);
  EXPECT_EQ(trials[3].experiment.data_settings.batch_size, 16);
  EXPECT_EQ(trials[3].experiment.optimizer->options.number("lr"), 0.5);
  EXPECT_EQ(trials[1].experiment.model.plugin, "resnet");
}

// --- identity ----------------------------------------------------------------------

TEST_F(SweepTest, SweptTrialHasTheJsonOfTheEquivalentPlainFile) {
  const auto trials = expand(kModel + kData +
                             "[optimizer]\nplugin = \"sgd\"\n"
                             "[sweep]\n"
                             "\"optimizer.lr\" = [1, 0.01]\n"
                             "\"model.hidden\" = [[32], [16, 16]]\n"
                             "\"data.batch_size\" = [4]\n");
  ASSERT_EQ(trials.size(), 4u);
  const Experiment plain = load(
      "[model]\nplugin = \"mlp\"\nhidden = [16, 16]\n"
      "[data]\nplugin = \"synthetic\"\nbatch_size = 4\n"
      "[optimizer]\nplugin = \"sgd\"\nlr = 1.0\n",
      "plain.toml");
  EXPECT_EQ(trials[1].experiment.resolved_json(), plain.resolved_json());
  EXPECT_EQ(trials[1].experiment.config_hash(), plain.config_hash());
  std::set<std::string> hashes;
  for (const auto& trial : trials) hashes.insert(trial.experiment.config_hash());
  EXPECT_EQ(hashes.size(), 4u);  // a changed value changes the hash
}

TEST_F(SweepTest, SameSweepWrittenDifferentlyGivesTheSameTrials) {
  const auto a = expand(kMinimal + "[sweep]\n\"train.steps\" = [1, 2]\n\"experiment.seed\" = [3]\n",
                        {}, "a.toml");
  const auto b = expand("[sweep.experiment]\nseed = [3]\n[sweep.train]\nsteps = [1, 2]\n" +
                            kOptimizer + kData + kModel,
                        {}, "b.toml");
  std::set<std::string> ha, hb;
  for (const auto& t : a) ha.insert(t.experiment.config_hash());
  for (const auto& t : b) hb.insert(t.experiment.config_hash());
  EXPECT_EQ(ha, hb);
}

TEST_F(SweepTest, TrialsWithTheSameConfigurationAreAnError) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"train.warmup\" = [10, 10]\n");
  EXPECT_EQ(std::string(e.what()), file() +
                                       ": trial 2 (train.warmup=10) has the same configuration "
                                       "as trial 1 (train.warmup=10)");
  EXPECT_EQ(e.hint(),
            "remove one of them; for more runs of one configuration, raise [experiment] repeats");
  // Spelling out a default does not make a different trial.
  EXPECT_THROW_MSG(
      static_cast<void>(expand(kMinimal + "[[trial]]\n[[trial]]\n\"train.warmup\" = 10\n")), Error,
      file() + ": trial 2 (train.warmup=10) has the same configuration as trial 1 "
               "(base configuration)");
}

// --- errors ------------------------------------------------------------------------

TEST_F(SweepTest, UnknownKey) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"train.stepz\" = [1, 2]\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 1) + "unknown key 'train.stepz' in [sweep]; did you mean 'train.steps'?");
  EXPECT_EQ(e.hint(), "keys of [train]: steps, warmup, precision, accumulate, clip_grad_norm, save_to");
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[sweep]\n\"trian.steps\" = [1]\n")), Error,
                   at(9, 1) + "unknown key 'trian.steps' in [sweep]; did you mean 'train.steps'?");
  const Error section = expand_error(kMinimal + "[sweep]\n\"steps\" = [1]\n");
  EXPECT_EQ(std::string(section.what()), at(9, 1) + "unknown key 'steps' in [sweep]");
  EXPECT_EQ(section.hint(),
            "a key is written section.key, e.g. train.steps; known sections: experiment, device, runtime, env, "
            "model, data, optimizer, train, schedule, infer, eval, profile, distributed, comm_hook, kernel, plugins");
}

TEST_F(SweepTest, UnknownPluginOptionNamesTheTrial) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"model.hiden\" = [[8], [9]]\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 1) + "unknown option 'hiden' for model plugin 'mlp'; did you mean 'hidden'? "
                       "(in trial 1: model.hiden=[8])");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe mlp' to see its options; [model] also "
                      "takes init_from, strict, check_against, check_tolerance, channels_last");
}

TEST_F(SweepTest, OptionOfAnotherPluginNamesTheTrial) {
  const Error e = expand_error("[model]\nplugin = \"mlp\"\nhidden = [8]\n" + kData + kOptimizer +
                               "[sweep]\n\"model.plugin\" = [\"mlp\", \"resnet\"]\n");
  EXPECT_EQ(std::string(e.what()),
            at(3, 1) + "unknown option 'hidden' for model plugin 'resnet' (in trial 2: "
                       "model.plugin=\"resnet\")");
}

TEST_F(SweepTest, ValueOfTheWrongTypePointsAtTheListElement) {
  const Error host = expand_error(kMinimal + "[sweep]\n\"train.steps\" = [10, \"x\"]\n");
  EXPECT_EQ(std::string(host.what()),
            at(9, 22) + "'train.steps' must be an integer, found a string (in trial 2: "
                        "train.steps=\"x\")");
  const Error option = expand_error(kMinimal + "[sweep]\n\"optimizer.lr\" = [0.1, \"fast\"]\n");
  EXPECT_EQ(std::string(option.what()),
            at(9, 24) + "'optimizer.lr' must be a number, found a string (in trial 2: "
                        "optimizer.lr=\"fast\")");
  EXPECT_EQ(option.hint(), "run 'runner plugins describe sgd' to see its options");
  EXPECT_THROW_MSG(
      static_cast<void>(expand(kMinimal + "[sweep]\n\"model.hidden\" = [[64], [64, \"x\"]]\n")),
      Error,
      at(9, 30) + "'model.hidden[1]' must be an integer, found a string (in trial 2: "
                  "model.hidden=[64, \"x\"])");
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[sweep]\n\"train.steps\" = [5, 0]\n")),
                   Error,
                   at(9, 21) + "'train.steps' must be between 1 and 1000000, found 0 (in trial 2: train.steps=0)");
}

TEST_F(SweepTest, AxisThatIsNotAList) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"train.steps\" = 5\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 17) + "'sweep.train.steps' must be a list of values, found an integer");
  EXPECT_EQ(e.hint(), "a sweep axis lists the values to try, e.g. \"train.steps\" = [100, 200]");
}

TEST_F(SweepTest, EmptyAxis) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"train.steps\" = []\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 17) + "'sweep.train.steps' is empty: a sweep axis needs at least one value");
  EXPECT_THROW_MSG(
      static_cast<void>(expand(kMinimal + "[sweep.zip.g]\n\"train.steps\" = []\n")), Error,
      at(9, 17) + "'sweep.zip.g.train.steps' is empty: a sweep axis needs at least one value");
}

TEST_F(SweepTest, ZipGroupsOfUnequalLength) {
  const Error e = expand_error(kMinimal +
                               "[sweep.zip.opt]\n"
                               "\"optimizer.lr\" = [0.1, 0.2]\n"
                               "\"optimizer.momentum\" = [0.9, 0.8, 0.7]\n");
  EXPECT_EQ(std::string(e.what()),
            at(10, 24) + "'sweep.zip.opt.optimizer.momentum' has 3 values, but "
                        "'sweep.zip.opt.optimizer.lr' has 2");
  EXPECT_EQ(e.hint(), "the keys of a zip group vary together, so their lists need the same length");
}

TEST_F(SweepTest, MalformedZipGroups) {
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[sweep.zip.opt]\n")), Error,
                   at(8, 1) + "'sweep.zip.opt' is empty: a zip group needs at least one key");
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[sweep]\nzip = [1]\n")), Error,
                   at(9, 7) + "'sweep.zip' must be a table of zip groups, found an array");
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[sweep.zip]\ng = [1]\n")), Error,
                   at(9, 5) + "'sweep.zip.g' must be a table, found an array");
}

TEST_F(SweepTest, KeySweptTwice) {
  const Error e = expand_error(kMinimal +
                               "[sweep]\n\"train.steps\" = [1, 2]\n"
                               "[sweep.zip.g]\n\"train.steps\" = [3]\n\"train.warmup\" = [0]\n");
  EXPECT_EQ(std::string(e.what()), at(11, 1) + "'train.steps' is swept twice");
  EXPECT_EQ(e.hint(), "a key belongs to one axis or zip group of [sweep]");
}

TEST_F(SweepTest, KeysThatAreTheSameForEveryTrial) {
  const Error e =
      expand_error(kMinimal + "[sweep]\n\"experiment.kind\" = [\"train\", \"infer\"]\n");
  EXPECT_EQ(std::string(e.what()), at(9, 1) + "'experiment.kind' cannot vary between trials");
  EXPECT_EQ(e.hint(),
            "these keys are the same for every trial: experiment.name, experiment.description, "
            "experiment.kind, experiment.repeats, experiment.min_repeats, experiment.max_repeats, "
            "experiment.time_budget, experiment.timeout, experiment.labels, "
            "train.save_to, "
            "distributed.timeout, "
            "plugins.path");
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[[trial]]\n\"experiment.repeats\" = 2\n")),
                   Error, at(9, 1) + "'experiment.repeats' cannot vary between trials");
}

TEST_F(SweepTest, KeyBothInTrialAndSweep) {
  const Error e = expand_error(kMinimal +
                               "[[trial]]\n\"train.steps\" = 5\n"
                               "[sweep]\n\"train.steps\" = [1, 2]\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 1) + "'train.steps' is set in [[trial]] and swept in [sweep]");
  EXPECT_EQ(e.hint(),
            "a key varies in one place: list it in [sweep], or set it in each [[trial]]");
}

TEST_F(SweepTest, MalformedTrials) {
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[trial]\n\"train.steps\" = 5\n")), Error,
                   at(8, 1) + "'trial' must be an array of tables, found a table");
  EXPECT_THROW_MSG(static_cast<void>(expand("trial = []\n" + kMinimal)), Error,
                   at(1, 9) + "'trial' is empty: list at least one [[trial]]");
  EXPECT_THROW_MSG(
      static_cast<void>(expand(kMinimal + "[[trial]]\n\"optimiser.lr\" = 0.1\n")), Error,
      at(9, 1) + "unknown key 'optimiser.lr' in [[trial]]; did you mean 'optimizer.lr'?");
  EXPECT_THROW_MSG(
      static_cast<void>(expand(kMinimal + "[[trial]]\n\"train.steps\" = 1\ntrain.steps = 2\n")),
      Error, at(10, 7) + "'train.steps' is set twice in this [[trial]]");
  EXPECT_THROW_MSG(static_cast<void>(expand(kMinimal + "[[trial]]\n\"train.steps\" = \"x\"\n")),
                   Error,
                   at(9, 17) + "'train.steps' must be an integer, found a string (in trial 1: "
                               "train.steps=\"x\")");
}

TEST_F(SweepTest, SectionOfTheOtherKindFromASweep) {
  const Error e = expand_error(kMinimal + "[sweep]\n\"infer.batches\" = [1]\n");
  EXPECT_EQ(std::string(e.what()), at(9, 1) + "section [infer] is only used by infer experiments "
                                               "(in trial 1: infer.batches=1)");
}

TEST_F(SweepTest, ProblemsOfTheFilesNameNoTrial) {
  // The base has the problem whatever the sweep says: no "(in trial ...)".
  EXPECT_THROW_MSG(
      static_cast<void>(
          expand(kMinimal + "[train]\nsteps = 0\n[sweep]\n\"train.warmup\" = [1, 2]\n")),
      Error, at(9, 9) + "'train.steps' must be between 1 and 1000000, found 0");
  EXPECT_THROW_MSG(static_cast<void>(expand(kModel + "hiden = [1]\n" + kData + kOptimizer +
                                            "[sweep]\n\"train.warmup\" = [1, 2]\n")),
                   Error,
                   at(3, 1) + "unknown option 'hiden' for model plugin 'mlp'; did you mean "
                              "'hidden'?");
}

TEST_F(SweepTest, ProblemOfALaterTrialNamesItEvenIfTheBaseHasItToo) {
  // Trial 1 passes, so the missing lr is trial 2's problem, though the base lacks it as well.
  EXPECT_THROW_MSG(static_cast<void>(expand(kModel + kData + "[optimizer]\nplugin = \"sgd\"\n" +
                                            "[[trial]]\n\"optimizer.lr\" = 0.1\n"
                                            "[[trial]]\n\"train.steps\" = 5\n")),
                   Error,
                   at(5, 1) + "missing required option 'lr' for optimizer plugin 'sgd' (in "
                              "trial 2: train.steps=5)");
  EXPECT_THROW_MSG(static_cast<void>(expand(kModel + kData + "[optimizer]\nplugin = \"sgd\"\n" +
                                            "[[trial]]\n\"optimizer.lr\" = 0.1\n[[trial]]\n")),
                   Error,
                   at(5, 1) + "missing required option 'lr' for optimizer plugin 'sgd' (in "
                              "trial 2: base configuration)");
}

TEST_F(SweepTest, TooManyTrials) {
  std::string text = kMinimal + "[sweep]\n";
  for (const char* key : {"train.steps", "train.warmup", "experiment.seed", "device.threads"}) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict) on "literal" + std::string&&.
    text.append("\"").append(key).append("\" = [");
    for (int i = 1; i <= 20; ++i) text.append(i > 1 ? ", " : "").append(std::to_string(i));
    text.append("]\n");
  }
  const Error e = expand_error(text);
  EXPECT_EQ(std::string(e.what()),
            file() + ": [sweep] and [[trial]] expand to more than 100000 trials");
}

}  // namespace
}  // namespace runner
