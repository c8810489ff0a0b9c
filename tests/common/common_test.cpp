// Tests of the small shared helpers: strings, SHA-256, errors, JSON quoting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("steps", "steps"), 0u);
  EXPECT_EQ(edit_distance("stepz", "steps"), 1u);   // substitution
  EXPECT_EQ(edit_distance("step", "steps"), 1u);    // insertion
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ClosestMatch, SuggestsPlausibleTypos) {
  const std::vector<std::string> keys = {"steps", "warmup"};
  EXPECT_EQ(closest_match("stepz", keys), std::optional<std::string>("steps"));
  EXPECT_EQ(closest_match("warmpu", keys), std::optional<std::string>("warmup"));
}

TEST(ClosestMatch, RejectsWordsTooFarAway) {
  const std::vector<std::string> keys = {"steps", "warmup"};
  EXPECT_EQ(closest_match("learning_rate", keys), std::nullopt);
  EXPECT_EQ(closest_match("x", {}), std::nullopt);
  // Short words allow one edit: "ab" -> "xy" needs two.
  EXPECT_EQ(closest_match("ab", {"xy"}), std::nullopt);
  EXPECT_EQ(closest_match("ab", {"ax"}), std::optional<std::string>("ax"));
}

TEST(ClosestMatch, PrefersTheNearestAndTheFirstOnTies) {
  EXPECT_EQ(closest_match("batch_sizes", {"batches", "batch_size"}),
            std::optional<std::string>("batch_size"));
  EXPECT_EQ(closest_match("cat", {"bat", "hat"}), std::optional<std::string>("bat"));
}

TEST(Join, JoinsWithSeparator) {
  EXPECT_EQ(join({}, ", "), "");
  EXPECT_EQ(join({"a"}, ", "), "a");
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join({"", ""}, "-"), "-");
}

TEST(Split, KeepsEmptyFields) {
  EXPECT_EQ(split("a,b,c", ','), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split("a,,b,", ','), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(split("/usr/lib:/opt", ':'), (std::vector<std::string>{"/usr/lib", "/opt"}));
}

TEST(Trim, RemovesSurroundingWhitespaceOnly) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim("x"), "x");
  EXPECT_EQ(trim(" \t\n"), "");
  EXPECT_EQ(trim(""), "");
}

TEST(Sha256, MatchesKnownDigests) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, FileDigestEqualsDigestOfContents) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("common_test_sha256_" + std::to_string(::testing::UnitTest::GetInstance()
                                                                ->random_seed()) +
                     ".bin");
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  EXPECT_EQ(sha256_file_hex(path), sha256_hex("abc"));
  std::filesystem::remove(path);
  EXPECT_THROW(static_cast<void>(sha256_file_hex(path)), Error);
}

TEST(SourceLocation, FormatsFileLineAndColumn) {
  EXPECT_EQ((SourceLocation{"exp.toml", 3, 7}).str(), "exp.toml:3:7");
  EXPECT_EQ((SourceLocation{"exp.toml", 0, 0}).str(), "exp.toml");
  EXPECT_TRUE((SourceLocation{"exp.toml", 1, 1}).known());
  EXPECT_FALSE((SourceLocation{"exp.toml", 0, 0}).known());
}

TEST(Error, InputErrorsExitWithTwoAndRunErrorsWithOne) {
  EXPECT_EQ(Error("bad").exit_code(), kExitBadInput);
  EXPECT_EQ(Error("bad").exit_code(), 2);
  EXPECT_EQ(Error("failed", {}, ErrorKind::run).exit_code(), kExitRunFailed);
  EXPECT_EQ(Error("failed", {}, ErrorKind::run).exit_code(), 1);
  EXPECT_EQ(Error("bad").kind(), ErrorKind::input);
}

TEST(Error, PrefixesTheLocationAndKeepsTheHint) {
  const Error located(SourceLocation{"a.toml", 2, 5}, "unknown key 'x'", "keys: y");
  EXPECT_STREQ(located.what(), "a.toml:2:5: unknown key 'x'");
  EXPECT_EQ(located.hint(), "keys: y");
  EXPECT_STREQ(Error(SourceLocation{"a.toml", 0, 0}, "missing").what(), "a.toml: missing");
  EXPECT_STREQ(Error(SourceLocation{}, "no file").what(), "no file");
  EXPECT_THROW_MSG(throw Error(SourceLocation{"f", 1, 2}, "m"), Error, "f:1:2: m");
}

TEST(JsonQuote, EscapesPerRfc8259) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("\n\t\x01"), "\"\\n\\t\\u0001\"");
  EXPECT_EQ(json_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 passes through
}

TEST(RunKind, ParsesWhatToStringPrintsAndRejectsEverythingElse) {
  for (const RunKind kind : kRunKinds) EXPECT_EQ(parse_run_kind(to_string(kind)), kind);
  EXPECT_STREQ(to_string(RunKind::train), "train");
  EXPECT_STREQ(to_string(RunKind::infer), "infer");
  std::ostringstream out;
  out << RunKind::infer;
  EXPECT_EQ(out.str(), "infer");
  EXPECT_THROW_MSG(static_cast<void>(parse_run_kind("Train")), Error,
                   "unknown run kind 'Train' (expected train or infer)");
  EXPECT_THROW_MSG(static_cast<void>(parse_run_kind("")), Error,
                   "unknown run kind '' (expected train or infer)");
}

}  // namespace
}  // namespace runner
