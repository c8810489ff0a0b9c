// The example in runner/options.hpp's opening comment, compiled: the block
// between the markers below is that comment's example, verbatim (checked by
// docs_sync_test), followed by tests of what it declares.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runner/options.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

// --- begin options.hpp example ---
struct ScheduleOptions {
  double peak_lr = 0.0;                       // required: no useful default
  std::int64_t warmup_steps = 100;
  std::string shape = "cosine";
  std::array<double, 2> betas{0.9, 0.999};    // exactly two numbers
  std::vector<std::string> no_decay{"bias", "norm"};
};

runner::OptionBinder<ScheduleOptions> schedule_options() {
  runner::OptionBinder<ScheduleOptions> o;
  o.field("peak_lr", &ScheduleOptions::peak_lr, "learning rate after warm-up")
      .range(0.0, std::nullopt)
      .required();
  o.field("warmup_steps", &ScheduleOptions::warmup_steps, "steps of linear warm-up")
      .range(0, 1000000);
  o.field("shape", &ScheduleOptions::shape, "decay after warm-up").one_of({"cosine", "linear"});
  o.field("betas", &ScheduleOptions::betas, "moment decay rates").range(0.0, 1.0);
  o.field("no_decay", &ScheduleOptions::no_decay, "parameters without weight decay")
      .items(0, 8);
  return o;
}
// --- end options.hpp example ---

TEST(OptionBinder, DeclaresEachFieldOnceWithTheStructsDefaults) {
  const runner::OptionBinder<ScheduleOptions> binder = schedule_options();
  const auto& specs = binder.schema().specs();
  ASSERT_EQ(specs.size(), 5u);
  std::vector<std::string> names;
  for (const auto& spec : specs) names.push_back(spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"peak_lr", "warmup_steps", "shape", "betas",
                                             "no_decay"}));

  const runner::OptionSpec& peak = specs[0];
  EXPECT_EQ(peak.type, runner::OptionType::number);
  EXPECT_FALSE(peak.default_value.has_value());  // required
  EXPECT_EQ(peak.min, 0.0);
  EXPECT_FALSE(peak.max.has_value());
  EXPECT_EQ(peak.doc, "learning rate after warm-up");

  EXPECT_EQ(specs[1].type, runner::OptionType::integer);
  EXPECT_EQ(specs[1].default_value, runner::OptionValue{std::int64_t{100}});
  EXPECT_EQ(specs[2].type, runner::OptionType::string);
  EXPECT_EQ(specs[2].default_value, runner::OptionValue{std::string("cosine")});
  EXPECT_EQ(specs[2].choices, (std::vector<std::string>{"cosine", "linear"}));

  const runner::OptionSpec& betas = specs[3];
  EXPECT_EQ(betas.type, runner::OptionType::number_list);
  EXPECT_EQ(betas.default_value, runner::OptionValue{(std::vector<double>{0.9, 0.999})});
  EXPECT_EQ(betas.min_items, 2u);  // a std::array has exactly its length
  EXPECT_EQ(betas.max_items, std::optional<std::size_t>(2));
  EXPECT_EQ(betas.min, 0.0);
  EXPECT_EQ(betas.max, 1.0);

  const runner::OptionSpec& no_decay = specs[4];
  EXPECT_EQ(no_decay.type, runner::OptionType::string_list);
  EXPECT_EQ(no_decay.default_value,
            runner::OptionValue{(std::vector<std::string>{"bias", "norm"})});
  EXPECT_EQ(no_decay.min_items, 0u);
  EXPECT_EQ(no_decay.max_items, std::optional<std::size_t>(8));
}

TEST(OptionBinder, ReadsValidatedOptionsIntoTheStruct) {
  const runner::Options options({{"peak_lr", 0.5},
                                 {"warmup_steps", std::int64_t{7}},
                                 {"shape", std::string("linear")},
                                 {"betas", std::vector<double>{0.8, 0.95}},
                                 {"no_decay", std::vector<std::string>{"ln_"}}});
  const ScheduleOptions o = schedule_options().read(options);
  EXPECT_EQ(o.peak_lr, 0.5);
  EXPECT_EQ(o.warmup_steps, 7);
  EXPECT_EQ(o.shape, "linear");
  EXPECT_EQ(o.betas, (std::array<double, 2>{0.8, 0.95}));
  EXPECT_EQ(o.no_decay, std::vector<std::string>{"ln_"});
  // A value missing from the map keeps the struct's default.
  const ScheduleOptions partial = schedule_options().read(runner::Options({{"peak_lr", 1.0}}));
  EXPECT_EQ(partial.warmup_steps, 100);
  EXPECT_EQ(partial.no_decay, (std::vector<std::string>{"bias", "norm"}));
}

struct Narrow {
  int threads = 4;
  std::uint8_t level = 1;
  std::vector<std::int32_t> sizes{1, 2};
  float scale = 0.5f;
  bool fast = true;
  std::array<std::string, 3> names{"a", "b", "c"};
};

TEST(OptionBinder, NarrowIntegerFieldsAreBoundedByTheirType) {
  runner::OptionBinder<Narrow> binder;
  binder.field("threads", &Narrow::threads, "threads");
  binder.field("level", &Narrow::level, "level");
  binder.field("sizes", &Narrow::sizes, "sizes");
  binder.field("scale", &Narrow::scale, "scale");
  binder.field("fast", &Narrow::fast, "fast");
  binder.field("names", &Narrow::names, "names");
  const auto& specs = binder.schema().specs();
  EXPECT_EQ(specs[0].min, -2147483648.0);
  EXPECT_EQ(specs[0].max, 2147483647.0);
  EXPECT_EQ(specs[1].min, 0.0);
  EXPECT_EQ(specs[1].max, 255.0);
  EXPECT_EQ(specs[2].type, runner::OptionType::integer_list);
  EXPECT_EQ(specs[2].max, 2147483647.0);  // per item
  EXPECT_EQ(specs[3].type, runner::OptionType::number);
  EXPECT_EQ(specs[3].default_value, runner::OptionValue{0.5});
  EXPECT_EQ(specs[4].type, runner::OptionType::boolean);
  EXPECT_EQ(specs[5].type, runner::OptionType::string_list);
  EXPECT_EQ(specs[5].min_items, 3u);

  const Narrow n = binder.read(runner::Options({{"level", std::int64_t{200}},
                                                {"sizes", std::vector<std::int64_t>{5}},
                                                {"names", std::vector<std::string>{"x", "y", "z"}}}));
  EXPECT_EQ(n.level, 200);
  EXPECT_EQ(n.sizes, std::vector<std::int32_t>{5});
  EXPECT_EQ(n.names[2], "z");
  // Values the host would have refused are still caught, not wrapped around.
  EXPECT_THROW_MSG((void)binder.read(runner::Options({{"level", std::int64_t{300}}})),
                   std::out_of_range, "option 'level' = 300 does not fit its field");
  EXPECT_THROW_MSG(
      (void)binder.read(runner::Options({{"names", std::vector<std::string>{"x"}}})),
      std::invalid_argument, "option 'names' has 1 items, expected 3");
}

TEST(OptionBinder, ADuplicateOrMistypedDeclarationIsAProgrammingError) {
  runner::OptionBinder<Narrow> binder;
  binder.field("threads", &Narrow::threads, "threads");
  EXPECT_THROW_MSG(binder.field("threads", &Narrow::level, "again"), std::logic_error,
                   "option 'threads' is declared twice");
  runner::OptionSchema schema;
  EXPECT_THROW_MSG(schema.add("x", runner::OptionType::integer, runner::OptionValue{1.5}, "x"),
                   std::logic_error, "the default of option 'x' is not an integer");
}

TEST(OptionValue, StringListsRender) {
  EXPECT_EQ(runner::to_string(runner::OptionValue{std::vector<std::string>{"bias", "norm"}}),
            "[\"bias\", \"norm\"]");
  EXPECT_EQ(runner::describe(runner::OptionType::string_list), std::string("a list of strings"));
  EXPECT_EQ(runner::short_name(runner::OptionType::string_list), std::string("string[]"));
}

}  // namespace
