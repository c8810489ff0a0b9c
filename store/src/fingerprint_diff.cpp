// The fingerprint diff of two sides (see fingerprint_diff.hpp).
#include "runner/store/fingerprint_diff.hpp"

#include <algorithm>
#include <array>

namespace runner::store {
namespace {

// Keys whose difference cannot change a performance number. Everything else,
// including keys added to the fingerprint later, is treated as mattering: a
// false "this may matter" costs a glance, a false "benign" hides a cause.
constexpr std::array<std::string_view, 5> kBenignKeys = {
    "host.hostname",           // the same hardware under another name
    "seed",                    // same shapes and work; only the values differ
    "software.git_commit",     // runner's own commit: plugins are identified by trial
    "software.git_dirty",      //   identity, and the engine's overhead is < 1% of a step
    "software.runner_version",
};

}  // namespace

bool fingerprint_key_matters(std::string_view key) {
  return std::find(kBenignKeys.begin(), kBenignKeys.end(), key) == kBenignKeys.end();
}

FingerprintDiff diff_fingerprints(const std::map<std::string, std::string>& a,
                                  const std::map<std::string, std::string>& b) {
  FingerprintDiff diff;
  auto add = [&](const std::string& key, std::optional<std::string> va, std::optional<std::string> vb) {
    auto& into = fingerprint_key_matters(key) ? diff.matters : diff.benign;
    into.push_back({key, std::move(va), std::move(vb)});
  };
  // Merge the two sorted maps so both outputs come out sorted by key.
  auto ia = a.begin();
  auto ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      add(ia->first, ia->second, std::nullopt);
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      add(ib->first, std::nullopt, ib->second);
      ++ib;
    } else {
      if (ia->second != ib->second) add(ia->first, ia->second, ib->second);
      ++ia;
      ++ib;
    }
  }
  return diff;
}

}  // namespace runner::store
