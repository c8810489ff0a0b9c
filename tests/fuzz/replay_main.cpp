// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput in an
// ordinary build (no libFuzzer), so the corpus and every crasher ever found
// run in ctest on every build.
//
//   replay PATH...               every file under each PATH is one input; a
//                                Markdown file gives one input per ```toml block
//   replay --write-seeds DIR PATH...   writes those inputs to DIR (a seed corpus for libFuzzer)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The ```toml blocks of a Markdown page.
std::vector<std::string> toml_blocks(const std::string& text) {
  std::vector<std::string> blocks;
  std::istringstream lines(text);
  std::string line, block;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (!inside && line.rfind("```toml", 0) == 0) {
      inside = true;
      block.clear();
    } else if (inside && line.rfind("```", 0) == 0) {
      inside = false;
      blocks.push_back(block);
    } else if (inside) {
      block += line + "\n";
    }
  }
  return blocks;
}

void collect(const fs::path& path, std::vector<std::pair<std::string, std::string>>& inputs) {
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) collect(file, inputs);
    return;
  }
  const std::string text = slurp(path);
  if (path.extension() == ".md") {
    int n = 0;
    for (const auto& block : toml_blocks(text))
      inputs.emplace_back(path.string() + "#" + std::to_string(++n), block);
    return;
  }
  inputs.emplace_back(path.string(), text);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  fs::path seeds;
  if (args.size() >= 2 && args[0] == "--write-seeds") {
    seeds = args[1];
    args.erase(args.begin(), args.begin() + 2);
    fs::create_directories(seeds);
  }
  if (args.empty()) {
    std::fprintf(stderr, "usage: %s [--write-seeds DIR] PATH...\n", argv[0]);
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const auto& arg : args) {
    if (!fs::exists(arg)) {
      std::fprintf(stderr, "no such input: %s\n", arg.c_str());
      return 2;
    }
    collect(arg, inputs);
  }
  int n = 0;
  for (const auto& [name, text] : inputs) {
    if (!seeds.empty()) {
      std::ofstream(seeds / ("seed-" + std::to_string(++n)), std::ios::binary) << text;
      continue;
    }
    std::fprintf(stderr, "%s\n", name.c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  }
  std::printf("%zu input(s) %s\n", inputs.size(), seeds.empty() ? "replayed" : "written");
  return 0;
}
