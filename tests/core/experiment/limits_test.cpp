// Bounded work for every input: what runner refuses to read or build, and
// that it refuses before the work (exit 2 with a position), not by crashing.
#include <sys/stat.h>

#include <chrono>
#include <iostream>
#include <string>

#include "experiment_fixture.hpp"

namespace runner::test {
namespace {

class LimitsTest : public ExperimentFixture {};

std::string repeat(const std::string& part, std::size_t times, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < times; ++i) out += (i ? separator : "") + part;
  return out;
}

TEST_F(LimitsTest, ADeeplyDottedHeaderIsRefusedBeforeTheParserRecursesIntoIt) {
  // 50,000 parts crashed toml++ (stack overflow); the scan stops at part 65.
  const std::string header = "[" + repeat("a", 50000, ".") + "]\nx = 1\n";
  const Error e = error_of(header);
  EXPECT_EQ(std::string(e.what()),
            at(1, 129) + "nested more than 64 levels deep (dotted key parts, arrays and inline "
                         "tables)");
  EXPECT_EQ(e.hint(), "an experiment needs a few levels; this is not one");
}

TEST_F(LimitsTest, NestingCountsKeysArraysAndInlineTablesButNotValuesOrQuotedKeys) {
  // 64 levels pass; the parser then sees an unknown section, which proves the scan let it through.
  const std::string at_limit = "[" + repeat("a", 64, ".") + "]\n";
  EXPECT_EQ(std::string(error_of(at_limit).what()).find("nested more than"), std::string::npos);
  // A header of 32 parts (32 tables) and a key of 34 parts under it (33 more tables): 65.
  const std::string split = "[" + repeat("a", 32, ".") + "]\n" + repeat("b", 34, ".") + " = 1\n";
  EXPECT_EQ(std::string(error_of(split).what()),
            at(2, 66) + "nested more than 64 levels deep (dotted key parts, arrays and inline "
                        "tables)");
  // Arrays nest: 65 brackets in a value.
  const std::string arrays = "[model]\nplugin = \"mlp\"\nhidden = " + std::string(65, '[') +
                             "1" + std::string(65, ']') + "\n";
  EXPECT_EQ(std::string(error_of(arrays).what()),
            at(3, 73) + "nested more than 64 levels deep (dotted key parts, arrays and inline "
                        "tables)");
  // Dots in values, strings, quoted keys and comments are not levels.
  std::string rates;
  for (int i = 1; i <= 100; ++i) rates += (i > 1 ? ", 0." : "0.") + std::to_string(1000 + i);
  const std::string flat = kMinimal + "[train]\nsteps = 10 # " + repeat("x", 200, ".") +
                           "\n[experiment]\ndescription = \"" + repeat("y", 200, ".") +
                           "\"\nname = '''" + repeat("z", 100, ".") + "'''\n" +
                           "[sweep]\n\"optimizer.lr\" = [" + rates + "]\n";
  EXPECT_EQ(expand(flat).size(), 100u);
}

// toml++ 3.3 reaches undefined behaviour (an unreachable branch) when it asks
// whether most non-ASCII characters are Unicode whitespace; the scan refuses
// such a character wherever toml++ would ask, and lets strings hold any.
TEST_F(LimitsTest, NonAsciiOutsideStringsIsRefusedBeforeTheParserSeesIt) {
  const std::string ho = "\xE1\xB8\xA9";  // U+1E29, 'ḩ'
  const Error bare = error_of("[model]\nplugin = mlp" + ho + "\n");
  EXPECT_EQ(std::string(bare.what()), at(2, 13) + "non-ASCII character outside a string or comment");
  EXPECT_EQ(bare.hint(), "keys and values other than strings are ASCII; quote the text");

  const Error escaped = error_of("[experiment]\nname = \"\"\"a\\" + ho + "\"\"\"\n");
  EXPECT_EQ(std::string(escaped.what()),
            at(2, 13) + "invalid escape: a backslash before a non-ASCII character");
  EXPECT_EQ(escaped.hint(), "escape a character as \\uXXXX, or drop the backslash");

  const Error continued = error_of("[experiment]\nname = \"\"\"a\\\n  " + ho + "\"\"\"\n");
  EXPECT_EQ(std::string(continued.what()),
            at(3, 3) + "non-ASCII character right after a line-ending backslash");

  // A quote inside a bare value (here after a number's dot) opens no string:
  // toml++ reads on through it as part of the token (a fuzzer's crasher).
  const Error dotted = error_of("x = 0x.\"\"\"k" + ho + "\"\"\"\n");
  EXPECT_EQ(std::string(dotted.what()), at(1, 12) + "non-ASCII character outside a string or comment");
  const Error bracket = error_of("e = 0xA['i" + ho + "'\n");
  EXPECT_EQ(std::string(bracket.what()), at(1, 11) + "non-ASCII character outside a string or comment");

  // In strings, comments and quoted dotted keys, any character is fine.
  const std::string fine = kMinimal + "# " + ho + "\n[experiment]\ndescription = \"" + ho +
                           "\"\nname = '''" + ho + "'''\n[model]\n\"a\".\"" + ho + "\" = 1\n";
  EXPECT_EQ(std::string(error_of(fine).what()).find("non-ASCII"), std::string::npos);
}

TEST_F(LimitsTest, OnlyRegularFilesAreRead) {
  const fs::path fifo = dir_ / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO without a writer would block forever; it is refused at once.
  EXPECT_THROW_MSG(static_cast<void>(parse_experiment_file(fifo)), Error,
                   "cannot open experiment file '" + fifo.string() +
                       "': not a regular file (a FIFO)");
  EXPECT_THROW_MSG(static_cast<void>(parse_experiment_file("/dev/zero")), Error,
                   "cannot open experiment file '/dev/zero': not a regular file (a character "
                   "device)");
  const Error e = error_of("extends = \"/dev/zero\"\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()),
            at(1, 11) + "cannot open extended file '/dev/zero' (resolved to /dev/zero): not a "
                        "regular file (a character device)");
  EXPECT_EQ(e.hint(), "an experiment is read from a regular file");
}

TEST_F(LimitsTest, AFileOverTheSizeCapIsRefusedUnread) {
  std::string big = kMinimal + "# " + std::string(8 * 1024 * 1024, 'x') + "\n";
  const Error e = error_of(big);
  EXPECT_EQ(std::string(e.what()),
            "cannot open experiment file '" + file() + "': larger than 8 MiB");
  EXPECT_EQ(e.hint(),
            "an experiment file may hold at most 8 MiB; split a long [[trial]] list into [sweep] "
            "axes or several files");
}

TEST_F(LimitsTest, TheMergedFilesAreCappedInTotal) {
  // Five bases of 7 MiB each: every one is under the per-file cap, together they are not.
  const std::string filler = "# " + std::string(7 * 1024 * 1024, 'x') + "\n";
  std::string extends = "extends = [";
  for (int i = 0; i < 5; ++i) {
    write(filler, "base" + std::to_string(i) + ".toml");
    extends += std::string(i ? ", " : "") + "\"base" + std::to_string(i) + ".toml\"";
  }
  const Error e = error_of(extends + "]\n" + kMinimal);
  EXPECT_EQ(std::string(e.what()),
            at(1, 68) + "the files of this experiment hold more than 32 MiB in all");
}

TEST_F(LimitsTest, ALongExtendsChainIsRefusedAtItsLimit) {
  for (int i = 1; i <= 40; ++i)
    write(i < 40 ? "extends = \"c" + std::to_string(i + 1) + ".toml\"\n" : kMinimal,
          "c" + std::to_string(i) + ".toml");
  const Error e = error_of("extends = \"c1.toml\"\n");
  const std::string message = e.what();
  EXPECT_EQ(message.substr(0, message.find(" (extended by")),
            at("c32.toml", 1, 11) + "extends chain is deeper than 32 files");
  // 32 deep is allowed.
  write(kMinimal, "c32.toml");
  EXPECT_NO_THROW(static_cast<void>(load("extends = \"c1.toml\"\n")));
}

TEST_F(LimitsTest, ExtendsDiamondsAreBoundedLinearlyNotExponentially) {
  // Each level extends the next twice: 2^22 paths to the bottom file.
  for (int d = 0; d < 22; ++d)
    write(d < 21 ? "extends = [\"l" + std::to_string(d + 1) + ".toml\", \"l" +
                       std::to_string(d + 1) + ".toml\"]\n"
                 : kMinimal,
          "l" + std::to_string(d) + ".toml");
  const Error e = error_of("extends = \"l0.toml\"\n");
  const std::string message = e.what();
  EXPECT_NE(message.find("extends reaches more than 256 files (a base reached by several paths "
                         "counts each time)"),
            std::string::npos)
      << message;
  EXPECT_EQ(e.hint(), "share bases through fewer paths, or merge files");
}

TEST_F(LimitsTest, NumbersThatWouldValidateAndThenFailAreRefusedAtValidation) {
  // Each of these used to validate and then fail or overflow at run time.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[experiment]\ntimeout = 9223372036854775807\n",
       at(2, 11) + "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found 9223372036854775807"},
      {"[experiment]\ntimeout = \"99999999999999999999h\"\n",
       at(2, 11) + "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found \"99999999999999999999h\""},
      {"[experiment]\ntimeout = 1e300\n",
       at(2, 11) + "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found 1e+300"},
      {"[experiment]\nrepeats = 1000000000\n",
       at(2, 11) + "'experiment.repeats' must be between 1 and 10000, found 1000000000"},
      {"[train]\nsteps = 1000000000000000000\n",
       at(2, 9) + "'train.steps' must be between 1 and 1000000, found 1000000000000000000"},
      {"[train]\nwarmup = 1000000000000000000\n",
       at(2, 10) + "'train.warmup' must be a step count between 0 and 1000000 or \"auto\", found "
                   "1000000000000000000"},
      {"[device]\nthreads = 1000000\n",
       at(2, 11) + "'device.threads' must be between 0 and 1024, found 1000000"},
      {"[distributed]\nworld_size = 1000\n",
       at(2, 14) + "'distributed.world_size' must be between 1 and 64, found 1000"},
      {"[distributed]\ntimeout = \"2d\"\n",
       at(2, 11) + "'distributed.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 86400 seconds, found \"2d\""},
  };
  for (const auto& [text, message] : cases)
    EXPECT_EQ(std::string(error_of(text + kMinimal).what()), message) << text;
}

TEST_F(LimitsTest, ADurationUnderTheShortestEnforceableIsRefusedAtItsPosition) {
  // issue 30 item 4: this validated, then every run was recorded timeout after 0 s.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[experiment]\ntimeout = \"0.0000000001ms\"\n",
       at(2, 11) + "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found \"0.0000000001ms\""},
      {"[experiment]\ntimeout = \"999ms\"\n",
       at(2, 11) + "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found \"999ms\""},
      {"[experiment]\ntimeout = 0.5\n",
       at(2, 11) + "'experiment.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 2592000 seconds, found 0.5"},
      {"[distributed]\ntimeout = \"1ms\"\n",
       at(2, 11) + "'distributed.timeout' must be a duration like \"90s\", \"30m\" or \"2h\" "
                   "from 1 to 86400 seconds, found \"1ms\""},
  };
  for (const auto& [text, message] : cases)
    EXPECT_EQ(std::string(error_of(text + kMinimal).what()), message) << text;
  // The minimum itself passes, in any spelling.
  EXPECT_EQ(load("[experiment]\ntimeout = \"1000ms\"\n" + kMinimal).timeout_s, 1.0);
  EXPECT_EQ(load("[experiment]\ntimeout = 1\n[distributed]\ntimeout = \"1s\"\n" + kMinimal)
                .distributed.timeout_s,
            1.0);
}

TEST_F(LimitsTest, TrialsTimesRepeatsIsCapped) {
  // 200 trials x 10,000 repetitions: each within its own bound, 2,000,000 runs together.
  std::string rates;
  for (int i = 1; i <= 200; ++i) rates += (i > 1 ? ", 0." : "0.") + std::to_string(1000 + i);
  const Error e = error_of("[experiment]\nrepeats = 10000\n" + kMinimal + "[sweep]\n" +
                           "\"optimizer.lr\" = [" + rates + "]\n");
  EXPECT_EQ(std::string(e.what()),
            at(2, 11) + "200 trial(s) x 10000 repetition(s) are more than 1000000 runs");
  EXPECT_EQ(e.hint(), "split the study into several experiments");
}

TEST_F(LimitsTest, TrialTablesExpandInLinearMemory) {
  // 20,000 [[trial]] tables: every trial shares one copy of the file's text
  // (it was copied into each, 14 GB at this size).
  std::string text = kMinimal;
  for (int i = 0; i < 20000; ++i)
    text += "[[trial]]\n\"optimizer.lr\" = 0." + std::to_string(100000 + i) + "\n";
  const std::vector<Trial> trials = expand(text);
  ASSERT_EQ(trials.size(), 20000u);
  EXPECT_EQ(trials.front().experiment.source.get(), trials.back().experiment.source.get());
  EXPECT_EQ(trials.back().experiment.source->text, text);
}

TEST_F(LimitsTest, TheTrialCapHoldsForTrialTablesAloneAndCombinedWithASweep) {
  // issue 30 item 3: 100,001 [[trial]] tables validated (21 s, 1.25 GB) while
  // the same count from a sweep was refused. Now the table over the cap is
  // named before any table is checked.
  auto trials = [](int count) {
    std::string text;
    text.reserve(static_cast<std::size_t>(count) * 32);
    for (int i = 0; i < count; ++i)
      text.append("[[trial]]\n\"optimizer.lr\" = 0.").append(std::to_string(1000000 + i)).append("\n");
    return text;
  };
  const auto started = std::chrono::steady_clock::now();
  const Error e = error_of(kMinimal + trials(100001));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // kMinimal is 7 lines; table i (from 0) starts at line 8 + 2i.
  EXPECT_EQ(std::string(e.what()), at(200008, 1) + "this [[trial]] is number 100001: an "
                                                   "experiment may have at most 100000 trials");
  EXPECT_EQ(e.hint(), "split the study into several experiments");
  std::cout << "100,001 [[trial]] tables refused in " << seconds << " s\n";
  // 100,000 tables are within the cap; 50,000 tables x a 3-value axis are not.
  const Error combined =
      error_of(kMinimal + "[sweep]\n\"train.steps\" = [1, 2, 3]\n" + trials(50000));
  EXPECT_EQ(std::string(combined.what()),
            file() + ": [sweep] and [[trial]] expand to more than 100000 trials");
}

TEST_F(LimitsTest, ANameWithControlCharactersIsRefused) {
  // As written in TOML, and as the message quotes it (JSON escapes).
  const std::vector<std::pair<std::string, std::string>> names = {
      {"\\u0000", "\"\\u0000\""},           {"red\\u001b[31m", "\"red\\u001b[31m\""},
      {"a\\rb", "\"a\\rb\""},               {"x\\bx", "\"x\\bx\""},
      {"c1\\u009b", "\"c1\\u009b\""}};  // C1 CSI: escaped by every message (issue 30)
  for (const auto& [toml, quoted] : names) {
    const Error e = error_of("[experiment]\nname = \"" + toml + "\"\n" + kMinimal);
    EXPECT_EQ(std::string(e.what()),
              at(2, 8) + "'experiment.name' must not contain control characters, found " + quoted)
        << toml;
    EXPECT_EQ(e.hint(),
              "a name is printed in tables and terminals; use letters, digits and punctuation");
  }
  // Letters of any script are fine.
  EXPECT_EQ(load("[experiment]\nname = \"caf\xc3\xa9 \xe6\x97\xa5\"\n" + kMinimal).name,
            "caf\xc3\xa9 \xe6\x97\xa5");
}

TEST_F(LimitsTest, EveryListOptionIsBoundedWhateverItsPluginDeclares) {
  // mlp's `hidden` here declares at least one item and no most; a million
  // hidden layers validated and then crashed the run process.
  std::string widths;
  for (int i = 0; i < 65537; ++i) widths += (i ? ",1" : "1");
  const Error e = error_of("[model]\nplugin = \"mlp\"\nhidden = [" + widths + "]\n" + kData +
                           kOptimizer);
  EXPECT_EQ(std::string(e.what()),
            at(3, 10) + "'model.hidden' must have between 1 and 65536 items, found 65537");
}

}  // namespace
}  // namespace runner::test

