// The experiment layer applies a plugin's option rules to every trial before
// any run: an integer's allowed values (OptionSpec::one_of_integers) and the
// checks of option combinations (OptionSchema's checks, as OptionBinder
// declares them), each reported at the option's file:line:col.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "experiment_fixture.hpp"

namespace runner {
namespace {

using test::ExperimentFixture;
using test::FakeCatalog;
using test::kData;
using test::kOptimizer;

struct AttentionOptions {
  std::int64_t width = 64;
  std::int64_t heads = 4;
  std::int64_t depth = 18;
  std::vector<std::int64_t> sizes{1};
};

// A model whose options carry the rules under test.
FakeCatalog rules_catalog() {
  FakeCatalog catalog = test::standard_catalog();
  OptionBinder<AttentionOptions> o;
  o.field("width", &AttentionOptions::width, "model width").range(1, 4096);
  o.field("heads", &AttentionOptions::heads, "attention heads").range(1, 64);
  o.field("depth", &AttentionOptions::depth, "layers").one_of_integers({18, 34, 50});
  o.field("sizes", &AttentionOptions::sizes, "sizes").one_of_integers({1, 2});
  o.check([](const AttentionOptions& a) {
    if (a.width % a.heads != 0)
      throw OptionError("width", "width = " + std::to_string(a.width) +
                                     " is not divisible by heads = " + std::to_string(a.heads));
  });
  catalog.add(PluginKind::model, "attention", o.schema());

  OptionSchema careless;
  careless.integer("size", 1, "size");
  careless.add_check([](const Options& options) {
    if (options.integer("size") > 1) throw std::runtime_error("size above 1 is not supported");
  });
  catalog.add(PluginKind::model, "careless", careless);
  return catalog;
}

class PluginOptionsTest : public ExperimentFixture {
 protected:
  void SetUp() override {
    ExperimentFixture::SetUp();
    catalog_ = rules_catalog();
  }
};

const std::string kAttention = "[model]\nplugin = \"attention\"\n";

TEST_F(PluginOptionsTest, AnIntegerOutsideItsChoicesIsRefusedAtItsValue) {
  const Error e = error_of(kAttention + "depth = 20\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()), at(3, 9) + "'model.depth' must be one of 18, 34, 50, found 20");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe attention' to see its options; [model] also "
                      "takes init_from, strict, check_against, check_tolerance, channels_last");
  EXPECT_EQ(load(kAttention + "depth = 34\n" + kData + kOptimizer).model.options.integer("depth"),
            34);
}

TEST_F(PluginOptionsTest, EachItemOfAListOfIntegersIsCheckedAgainstTheChoices) {
  const Error e = error_of(kAttention + "sizes = [1, 3]\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()), at(3, 13) + "'model.sizes[1]' must be one of 1, 2, found 3");
}

TEST_F(PluginOptionsTest, ACombinationCheckIsReportedAtTheOptionItNames) {
  const Error e = error_of(kAttention + "heads = 4\nwidth = 250\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(4, 9) + "'model.width' of model plugin 'attention': width = 250 is not divisible "
                       "by heads = 4");
  EXPECT_EQ(e.hint(), "run 'runner plugins describe attention' to see its options");
}

TEST_F(PluginOptionsTest, ACheckOfADefaultedOptionPointsAtThePluginLine) {
  const Error e = error_of(kAttention + "heads = 3\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(2, 10) + "'model.width' of model plugin 'attention': width = 64 is not divisible "
                        "by heads = 3");
}

TEST_F(PluginOptionsTest, ACheckThatThrowsSomethingElseRefusesThePluginsOptions) {
  const Error e = error_of("[model]\nplugin = \"careless\"\nsize = 2\n" + kData + kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(2, 10) + "model plugin 'careless' refuses these options: size above 1 is not "
                        "supported");
}

TEST_F(PluginOptionsTest, ASweepWithOneBadCombinationIsRefusedWholeNamingTheTrial) {
  const Error e = expand_error(kAttention + "width = 24\n" + kData + kOptimizer +
                               "[sweep]\n\"model.heads\" = [2, 4, 5, 8]\n");
  EXPECT_EQ(std::string(e.what()),
            at(3, 9) + "'model.width' of model plugin 'attention': width = 24 is not divisible "
                       "by heads = 5 (in trial 3: model.heads=5)");
  EXPECT_EQ(expand(kAttention + "width = 24\n" + kData + kOptimizer +
                   "[sweep]\n\"model.heads\" = [2, 4, 8]\n")
                .size(),
            3u);
}

}  // namespace
}  // namespace runner
