// The error of parse_enum (see enum_names.hpp).
#include "runner/common/enum_names.hpp"

#include <string>

#include "runner/common/error.hpp"

namespace runner {

void throw_unknown_name(std::string_view what, std::string_view text,
                        const std::vector<std::string_view>& names) {
  std::string expected;
  for (std::size_t i = 0; i < names.size(); ++i)
    expected += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") +
                std::string(names[i]);
  throw Error("unknown " + std::string(what) + " '" + std::string(text) + "' (expected " +
              expected + ")");
}

}  // namespace runner
