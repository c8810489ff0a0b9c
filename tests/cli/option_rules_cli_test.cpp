// End to end: a built-in plugin's option rules (an integer's allowed values,
// a combination of options, a rule over the data) refuse an experiment in
// `runner validate` and `runner run` with exit 2 at the option's
// file:line:col, before any run, recording nothing.
#include <gtest/gtest.h>

#include <string>

#include "support/cli_harness.hpp"

namespace {

// A train experiment on the built-in plugins: `model` and `data` are the
// lines of [model] and [data] (batch_size is added), `rest` follows [train].
std::string experiment(const std::string& model, const std::string& data,
                       const std::string& rest = "") {
  return "[device]\ntype = \"cpu\"\nthreads = 1\n\n[model]\n" + model + "\n\n[data]\n" + data +
         "\nbatch_size = 4\n\n[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n\n[train]\nsteps = 2\n"
         "warmup = 0\n" + rest;
}

const std::string kImages = "plugin = \"synthetic\"\nshape = [3, 32, 32]\nclasses = 10\nsize = 16";
const std::string kTokens = "plugin = \"synthetic_tokens\"\nvocab = 64\nseq_len = 16\nsize = 16";

class OptionRulesCli : public runner::test::CliTestBase {
 protected:
  OptionRulesCli() : CliTestBase("runner-option-rules-") {}
};

TEST_F(OptionRulesCli, ResnetDepthOutsideItsChoicesIsRefusedAtTheOption) {
  const auto file = write("resnet.toml", experiment("plugin = \"resnet\"\ndepth = 20", kImages));
  expect_refused(file, "depth = 20", "'model.depth' must be one of 18, 34, 50, 101, 152, found 20");
}

TEST_F(OptionRulesCli, WidthNotDivisibleByHeadsIsRefusedAtTheOption) {
  const auto file = write(
      "lm.toml", experiment("plugin = \"transformer_lm\"\nwidth = 250\nheads = 4", kTokens));
  expect_refused(file, "width = 250",
                 "'model.width' of model plugin 'transformer_lm': width = 250 is not divisible by "
                 "heads = 4; each head takes width / heads dimensions, so make width a multiple "
                 "of heads");
}

TEST_F(OptionRulesCli, ASweepWithOneBadCombinationIsRefusedWholeNamingTheTrial) {
  const auto file = write(
      "sweep.toml",
      experiment("plugin = \"transformer_lm\"\nwidth = 32\nheads = 2", kTokens,
                 "\n[sweep]\n\"model.heads\" = [2, 3, 4]\n"));
  expect_refused(file, "width = 32",
                 "'model.width' of model plugin 'transformer_lm': width = 32 is not divisible by "
                 "heads = 3; each head takes width / heads dimensions, so make width a multiple "
                 "of heads (in trial 2: model.heads=3)");
}

TEST_F(OptionRulesCli, ResnetWithFewerClassesThanTheLoaderIsRefusedBeforeAnyRun) {
  const auto file =
      write("classes.toml", experiment("plugin = \"resnet\"\nnum_classes = 5", kImages));
  expect_refused(file, "num_classes = 5",
                 "'model.num_classes' of model plugin 'resnet': num_classes = 5 is fewer than the "
                 "loader's 10 classes; raise it or leave it at 0 (the loader's)");
}

TEST_F(OptionRulesCli, VitPatchThatDoesNotDivideTheLoadersImagesIsRefusedBeforeAnyRun) {
  const auto file = write(
      "vit.toml", experiment("plugin = \"vit\"\nconfig = \"ti\"\npatch_size = 12", kImages));
  expect_refused(file, "patch_size = 12",
                 "'model.patch_size' of model plugin 'vit': image size 32 is not divisible by "
                 "patch_size = 12; choose a patch size that divides it or resize the loader's "
                 "images");
}

TEST_F(OptionRulesCli, DataAModelCannotTakeIsRefusedAtItsPluginLine) {
  const auto file = write(
      "grey.toml",
      experiment("plugin = \"vit\"\nconfig = \"ti\"\npatch_size = 8",
                 "plugin = \"synthetic\"\nshape = [3, 32, 48]\nclasses = 10\nsize = 16"));
  expect_refused(file, "plugin = \"vit\"",
                 "model plugin 'vit' cannot take this data: needs square images; the loader's "
                 "are 32x48 (height x width): set the loader's shape to [3, S, S]");
}

TEST_F(OptionRulesCli, DescribeShowsAnIntegersAllowedValues) {
  const runner::test::Result r = runner::test::run_runner("plugins describe resnet", dir_, {db_, {}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("18|34|50|101|152"), std::string::npos) << r.out;
}


TEST_F(OptionRulesCli, AClassificationModelWithoutDataIsRefusedAtValidation) {
  // Newcomer's tour (issue 30): without [data] there is no sample shape. The
  // model's data check refuses it at its plugin line, saying what to add,
  // also when init_from would otherwise build the model first and fail
  // inside the plugin with no position.
  const std::string message =
      "model plugin 'mlp' cannot take this data: a classification model needs the sample shape "
      "from the loader; add a [data] section whose loader declares its input shape";
  const std::string hint =
      "hint: this experiment has no [data] section; add one whose loader declares the sample "
      "shape and classes, e.g. [data] plugin = \"synthetic\", shape = [3, 32, 32], classes = "
      "10\n";
  const std::string head =
      "[device]\ntype = \"cpu\"\nthreads = 1\n[experiment]\nkind = \"infer\"\n[model]\n"
      "plugin = \"mlp\"\n";
  const std::filesystem::path weights = write("w.safetensors", "not read");
  for (const std::string& extra : {std::string(), "init_from = \"" + weights.string() + "\"\n"}) {
    const std::filesystem::path file = write("nodata.toml", head + extra);
    expect_refused(file, "plugin = \"mlp\"", message);
    const runner::test::Result r = runner::test::run_runner("validate " + file.string(), dir_);
    EXPECT_EQ(r.code, 2) << extra;
    EXPECT_EQ(r.err, "error: " + file.string() + ":7:10: " + message + "\n" + hint) << extra;
  }
}

}  // namespace
