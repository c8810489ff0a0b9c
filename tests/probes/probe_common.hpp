// Shared helpers for the LibTorch capability probes (tests/probes). Each probe
// is a plain program: exit 0 = capability works, 77 = skipped (ctest
// SKIP_RETURN_CODE), anything else = the capability is broken.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace probe {

inline constexpr int kSkip = 77;

// Prints a line prefixed with the probe's name, to stderr (ctest shows it).
inline void say(std::string_view probe, const std::string& message) {
  std::fprintf(stderr, "[%.*s] %s\n", static_cast<int>(probe.size()), probe.data(), message.c_str());
}

[[noreturn]] inline void fail(std::string_view probe, const std::string& message) {
  say(probe, "FAIL: " + message);
  std::exit(1);
}

// Throws on a failed expectation; main() reports it through fail().
inline void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

inline std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }
inline std::string text(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

}  // namespace probe
