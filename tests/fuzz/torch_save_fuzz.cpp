// Fuzz target for the parts of reading a torch.save file that runner does
// itself, before LibTorch sees a byte: the zip directory (read_zip_directory)
// and the check and rewrite of the pickle of the state dict
// (rewrite_state_pickle). An input that starts with "PK" is a whole file:
// its directory is read and every stored data.pkl in it is checked; any
// other input is a data.pkl on its own. The only acceptable failures are
// ZipError and PickleError (torch_file.cpp turns both into runner::Error);
// a directory that passes must describe its file (records inside it, no two
// overlapping, no name twice), a pickle that passes must be a protocol 2
// pickle ending in STOP. Anything else escaping, a crash, a read past the
// input, more than 1 s or 256 MB for one input is a defect.
//
// Built with libFuzzer (-DRUNNER_FUZZ=ON, clang) or linked to replay_main.cpp
// to replay a corpus in the normal build (ctest fuzz.*).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runner/weights/state_pickle.hpp"
#include "runner/weights/zip_directory.hpp"

namespace {

using runner::weights::ZipEntry;

void check_pickle(const std::string& pickle, std::uint64_t file_size) {
  try {
    const std::string out = runner::weights::detail::rewrite_state_pickle(pickle, file_size);
    if (out.size() < 3 || out.compare(0, 2, "\x80\x02") != 0 || out.back() != '.')
      __builtin_trap();
  } catch (const runner::weights::detail::PickleError&) {
  }
}

void check_archive(const std::string& file) {
  std::vector<ZipEntry> entries;
  try {
    entries = runner::weights::read_zip_directory(file);
  } catch (const runner::weights::ZipError&) {
    return;
  }
  std::set<std::string> names;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const ZipEntry& e : entries) {
    if (e.name.empty() || !names.insert(e.name).second) __builtin_trap();
    if (e.data > file.size() || e.stored > file.size() - e.data) __builtin_trap();
    spans.emplace_back(e.data, e.data + e.stored);
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) __builtin_trap();
  for (const ZipEntry& e : entries) {
    const bool pickle = e.name == "data.pkl" ||
                        (e.name.size() > 9 && e.name.compare(e.name.size() - 9, 9, "/data.pkl") == 0);
    if (pickle && e.method == 0 && e.stored == e.size)
      check_pickle(file.substr(static_cast<std::size_t>(e.data), static_cast<std::size_t>(e.stored)),
                   file.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (input.compare(0, 2, "PK") == 0) check_archive(input);
  else check_pickle(input, size);
  return 0;
}
