// The SDK's ways to state option rules before a plugin is built: allowed
// integers (OptionSpec::one_of_integers) and checks of option combinations
// (OptionBinder::check), which the binder's schema() wraps so that the host
// can call them on the untyped Options map.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runner/options.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

struct HeadOptions {
  std::int64_t width = 64;
  std::int64_t depth = 18;
  std::int64_t heads = 4;  // declared after the check: the check still sees it
};

runner::Options options(std::map<std::string, runner::OptionValue> values) {
  return runner::Options(std::move(values));
}

TEST(OptionSpec, OneOfIntegersKeepsTheAllowedValuesApartFromStringChoices) {
  runner::OptionSchema schema;
  runner::OptionSpec& spec =
      schema.integer("depth", 18, "layers").one_of_integers({18, 34, 50, 101, 152});
  EXPECT_EQ(spec.integer_choices, (std::vector<std::int64_t>{18, 34, 50, 101, 152}));
  EXPECT_TRUE(spec.choices.empty());
  // one_of({0}) would have meant a string; the integer form has its own name.
  runner::OptionSpec& zero = schema.integers("sizes", {0}, "sizes").one_of_integers({0});
  EXPECT_EQ(zero.integer_choices, (std::vector<std::int64_t>{0}));
}

TEST(OptionBinder, CheckIsWrappedToReadTheUntypedOptionsFirst) {
  runner::OptionBinder<HeadOptions> binder;
  binder.field("width", &HeadOptions::width, "width").range(1, 4096);
  binder.field("depth", &HeadOptions::depth, "depth").one_of_integers({18, 34});
  std::vector<HeadOptions> seen;
  binder.check([&seen](const HeadOptions& o) {
    seen.push_back(o);
    if (o.width % o.heads != 0)
      throw runner::OptionError("width", "width = " + std::to_string(o.width) +
                                             " is not divisible by heads = " +
                                             std::to_string(o.heads));
  });
  binder.field("heads", &HeadOptions::heads, "heads").range(1, 64);

  const runner::OptionSchema schema = binder.schema();
  ASSERT_EQ(schema.checks().size(), 1u);
  EXPECT_EQ(schema.specs()[1].integer_choices, (std::vector<std::int64_t>{18, 34}));

  schema.checks()[0](options({{"width", std::int64_t{96}}, {"heads", std::int64_t{8}}}));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].width, 96);
  EXPECT_EQ(seen[0].heads, 8);
  EXPECT_EQ(seen[0].depth, 18);  // absent from the map: the struct's default

  try {
    schema.checks()[0](options({{"width", std::int64_t{250}}, {"heads", std::int64_t{4}}}));
    ADD_FAILURE() << "no OptionError";
  } catch (const runner::OptionError& e) {
    EXPECT_EQ(e.option(), "width");
    EXPECT_STREQ(e.what(), "width = 250 is not divisible by heads = 4");
  }
}

TEST(OptionBinder, ACopyOfTheSchemaOutlivesTheBinder) {
  runner::OptionSchema schema;
  {
    runner::OptionBinder<HeadOptions> binder;
    binder.field("heads", &HeadOptions::heads, "heads");
    binder.check([](const HeadOptions& o) {
      if (o.heads > 16) throw runner::OptionError("heads", "at most 16 heads");
    });
    schema = binder.schema();
  }
  EXPECT_THROW_MSG(schema.checks()[0](options({{"heads", std::int64_t{32}}})),
                   runner::OptionError, "at most 16 heads");
  EXPECT_NO_THROW(schema.checks()[0](options({{"heads", std::int64_t{8}}})));
}

TEST(OptionSchema, AddCheckKeepsChecksInDeclarationOrder) {
  runner::OptionSchema schema;
  schema.integer("n", 1, "n");
  std::string order;
  schema.add_check([&order](const runner::Options&) { order += "a"; });
  schema.add_check([&order](const runner::Options&) { order += "b"; });
  for (const auto& check : schema.checks()) check(options({{"n", std::int64_t{1}}}));
  EXPECT_EQ(order, "ab");
}

}  // namespace
