// Documentation that shows code shows compiled code: every block of
// docs/plugins.md marked `<!-- verbatim: PATH -->` appears, character for
// character, in PATH (a file the suite builds), and the example in
// runner/options.hpp's opening comment is the one options_example_test.cpp
// compiles.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const fs::path kSource = RUNNER_SOURCE_DIR;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Block {
  std::string path;  // relative to the source tree
  std::string code;
  std::size_t line;  // 1-based line of the marker
};

// The fenced code blocks that follow a `<!-- verbatim: PATH -->` line.
std::vector<Block> verbatim_blocks(const std::string& markdown) {
  const std::string open = "<!-- verbatim: ", close = " -->";
  const std::vector<std::string> lines = lines_of(markdown);
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind(open, 0) != 0 || line.size() < open.size() + close.size()) continue;
    Block block{line.substr(open.size(), line.size() - open.size() - close.size()), "", i + 1};
    std::size_t j = i + 1;
    EXPECT_TRUE(j < lines.size() && lines[j].rfind("```", 0) == 0)
        << "docs line " << i + 1 << ": a verbatim marker must precede a fenced code block";
    for (++j; j < lines.size() && lines[j].rfind("```", 0) != 0; ++j) block.code += lines[j] + "\n";
    blocks.push_back(std::move(block));
    i = j;
  }
  return blocks;
}

TEST(DocsSync, EveryVerbatimBlockOfThePluginGuideIsInItsCompiledFile) {
  const std::vector<Block> blocks = verbatim_blocks(read(kSource / "docs" / "plugins.md"));
  // The two worked examples at least: a model and an optimizer.
  ASSERT_GE(blocks.size(), 2u);
  for (const Block& block : blocks) {
    ASSERT_TRUE(fs::exists(kSource / block.path))
        << "docs/plugins.md:" << block.line << " names " << block.path;
    EXPECT_FALSE(block.code.empty()) << "docs/plugins.md:" << block.line;
    EXPECT_NE(read(kSource / block.path).find(block.code), std::string::npos)
        << "docs/plugins.md:" << block.line << ": this block is not verbatim in " << block.path
        << ":\n"
        << block.code;
  }
}

TEST(DocsSync, TheOptionsHeaderExampleIsTheCompiledOne) {
  // The comment's example: the lines indented by "//   " (and blank "//"
  // lines between them) after the line that names the test.
  const std::vector<std::string> header =
      lines_of(read(kSource / "runner" / "sdk" / "include" / "runner" / "options.hpp"));
  std::string example;
  bool in_example = false;
  for (const std::string& line : header) {
    if (!in_example) {
      in_example = line.find("tests/sdk/options_example_test.cpp:") != std::string::npos;
      continue;
    }
    if (line == "//") {
      if (!example.empty()) example += "\n";
    } else if (line.rfind("//   ", 0) == 0) {
      example += line.substr(5) + "\n";
    } else {
      break;
    }
  }
  while (example.size() >= 2 && example.compare(example.size() - 2, 2, "\n\n") == 0)
    example.pop_back();
  ASSERT_FALSE(example.empty()) << "no example found in options.hpp";

  const std::string test = read(kSource / "tests" / "sdk" / "options_example_test.cpp");
  const std::string begin = "// --- begin options.hpp example ---\n";
  const std::string end = "// --- end options.hpp example ---\n";
  const auto from = test.find(begin), to = test.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(test.substr(from + begin.size(), to - from - begin.size()), example);
}

}  // namespace
