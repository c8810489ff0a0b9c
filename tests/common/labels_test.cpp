// Run labels (runner/common/labels.hpp): the key and value rules, --label
// arguments with their exact messages, and which labels a run records (the
// file's, the command line's over them, commit from the CI's variables).
#include "runner/common/labels.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using runner::Error;
using runner::Labels;

TEST(LabelsTest, KeyRules) {
  for (const char* good : {"commit", "branch", "build", "a", "A1", "os.version", "my-key_2"})
    EXPECT_EQ(runner::label_key_problem(good), "") << good;
  EXPECT_EQ(runner::label_key_problem(""), "must not be empty");
  EXPECT_EQ(runner::label_key_problem("1commit"), "must start with a letter");
  EXPECT_EQ(runner::label_key_problem("_x"), "must start with a letter");
  for (const char* bad : {"a=b", "a:b", "a b", "a,b", "a\"b", "a/b", "caf\xc3\xa9"})
    EXPECT_EQ(runner::label_key_problem(bad), "may hold only letters, digits, '_', '-' and '.'")
        << bad;
  EXPECT_EQ(runner::label_key_problem(std::string(64, 'k')), "");
  EXPECT_EQ(runner::label_key_problem(std::string(65, 'k')), "is longer than 64 bytes");
}

TEST(LabelsTest, ValueRules) {
  for (const char* good : {"abc123", "feature/x y", "v=1:2", "caf\xc3\xa9", "\\n"})
    EXPECT_EQ(runner::label_value_problem(good), "") << good;
  EXPECT_EQ(runner::label_value_problem(""), "must not be empty");
  EXPECT_EQ(runner::label_value_problem(std::string(256, 'v')), "");
  EXPECT_EQ(runner::label_value_problem(std::string(257, 'v')), "is longer than 256 bytes");
  for (const std::string& bad : {std::string("a\nb"), std::string("\x1b[31m"), std::string("a\tb"),
                                std::string("\xff"), std::string("x\0y", 3)})
    EXPECT_EQ(runner::label_value_problem(bad),
              "must be printable text (no control characters, UTF-8)");
}

TEST(LabelsTest, ParsesLabelArgumentsWithExactMessages) {
  EXPECT_EQ(runner::parse_label_argument("commit=abc123"),
            (std::pair<std::string, std::string>{"commit", "abc123"}));
  // The first '=' splits: a value may hold more.
  EXPECT_EQ(runner::parse_label_argument("flags=-O2 -DX=1"),
            (std::pair<std::string, std::string>{"flags", "-O2 -DX=1"}));
  EXPECT_THROW_MSG(static_cast<void>(runner::parse_label_argument("commit")), Error,
                   "--label commit: expected KEY=VALUE");
  EXPECT_THROW_MSG(static_cast<void>(runner::parse_label_argument("=abc")), Error,
                   "--label =abc: the key '' must not be empty");
  EXPECT_THROW_MSG(static_cast<void>(runner::parse_label_argument("my key=abc")), Error,
                   "--label my key=abc: the key 'my key' may hold only letters, digits, '_', '-' "
                   "and '.'");
  EXPECT_THROW_MSG(static_cast<void>(runner::parse_label_argument("commit=")), Error,
                   "--label commit=: the value of 'commit' must not be empty");
  EXPECT_THROW_MSG(static_cast<void>(runner::parse_label_argument("commit=a\x1b[0mb")), Error,
                   "--label commit=a\\e[0mb: the value of 'commit' must be printable text (no "
                   "control characters, UTF-8)");
  try {
    static_cast<void>(runner::parse_label_argument("commit"));
  } catch (const Error& e) {
    EXPECT_EQ(e.hint(), "e.g. --label commit=$(git rev-parse HEAD)");
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST(LabelsTest, CommandLineOverridesTheFileAndCommitComesFromTheEnvironment) {
  std::map<std::string, std::string> env;
  const runner::EnvLookup lookup = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const Labels file{{"branch", "main"}, {"build", "7"}};
  EXPECT_EQ(runner::resolve_labels(file, {{"build", "8"}}, lookup),
            (Labels{{"branch", "main"}, {"build", "8"}}));
  env["CI_COMMIT_SHA"] = "c1";
  EXPECT_EQ(runner::resolve_labels({}, {}, lookup).at("commit"), "c1");
  env["GITHUB_SHA"] = "g1";
  EXPECT_EQ(runner::resolve_labels({}, {}, lookup).at("commit"), "g1");
  env["RUNNER_LABEL_COMMIT"] = "r1";
  EXPECT_EQ(runner::resolve_labels({}, {}, lookup).at("commit"), "r1");
  // Set but empty counts as unset.
  env["RUNNER_LABEL_COMMIT"] = "";
  EXPECT_EQ(runner::resolve_labels({}, {}, lookup).at("commit"), "g1");
  // A commit given in the file or on the command line is never replaced.
  EXPECT_EQ(runner::resolve_labels({{"commit", "f1"}}, {}, lookup).at("commit"), "f1");
  EXPECT_EQ(runner::resolve_labels({{"commit", "f1"}}, {{"commit", "x1"}}, lookup).at("commit"),
            "x1");
  env["GITHUB_SHA"] = "bad\nsha";
  EXPECT_THROW_MSG(static_cast<void>(runner::resolve_labels({}, {}, lookup)), Error,
                   "the label commit from $GITHUB_SHA must be printable text (no control "
                   "characters, UTF-8)");
  Labels many;
  for (int i = 0; i < 33; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_THROW_MSG(static_cast<void>(runner::resolve_labels(many, {{"commit", "x"}}, {})), Error,
                   "cannot label the runs: 34 labels, at most 32");
}

}  // namespace
