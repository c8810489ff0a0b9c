// Command-line values of the bench programs: a number or an integer with a
// lower bound, or a message naming the program and flag and exit 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace bench {

[[noreturn]] inline void bad_value(const char* program, std::string_view flag, const char* what,
                                   double min, const std::string& text) {
  std::fprintf(stderr, "%s: %.*s needs %s >= %g, got '%s'\n", program,
               static_cast<int>(flag.size()), flag.data(), what, min, text.c_str());
  std::exit(2);
}

/// `text` as a number >= min.
inline double flag_number(const char* program, std::string_view flag, const std::string& text,
                          double min) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= min) return v;
  } catch (const std::exception&) {
  }
  bad_value(program, flag, "a number", min, text);
}

/// `text` as an integer >= min.
inline std::int64_t flag_integer(const char* program, std::string_view flag,
                                 const std::string& text, std::int64_t min) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min) return v;
  } catch (const std::exception&) {
  }
  bad_value(program, flag, "an integer", static_cast<double>(min), text);
}

}  // namespace bench
