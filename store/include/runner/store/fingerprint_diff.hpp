// The fingerprint diff of `runner compare` and `runner report`: which keys of
// two environment fingerprints differ, split by whether the difference can
// change a performance number. Source: store/src/fingerprint_diff.cpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runner::store {

/// One fingerprint key whose value differs between the sides.
struct FingerprintDifference {
  std::string key;                 ///< "area.key", e.g. "cpu.model".
  std::optional<std::string> a;    ///< Value on side A; nullopt when the key is absent there.
  std::optional<std::string> b;    ///< Value on side B; nullopt when the key is absent there.
};

/// Differing keys of two fingerprints, split by whether they can change a performance number.
struct FingerprintDiff {
  std::vector<FingerprintDifference> matters;  ///< Keys that can change performance, sorted by key.
  std::vector<FingerprintDifference> benign;   ///< Keys that cannot (hostname, commit, seed, ...), sorted by key.
  /// True when nothing differs at all.
  [[nodiscard]] bool empty() const { return matters.empty() && benign.empty(); }
};

/// True when a difference in fingerprint key `key` can change a performance number (unknown keys count as mattering).
[[nodiscard]] bool fingerprint_key_matters(std::string_view key);

/// Keys whose values differ, or that are present on one side only, classified with fingerprint_key_matters.
[[nodiscard]] FingerprintDiff diff_fingerprints(const std::map<std::string, std::string>& a,
                                                const std::map<std::string, std::string>& b);

}  // namespace runner::store
