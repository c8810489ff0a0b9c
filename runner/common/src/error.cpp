#include "runner/common/error.hpp"

#include <utility>

#include "runner/common/strings.hpp"

namespace runner {

std::string SourceLocation::str() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

Error::Error(const std::string& message, std::string hint, ErrorKind kind)
    : std::runtime_error(terminal_safe_lines(message)),
      hint_(terminal_safe_lines(hint)),
      kind_(kind) {}

Error::Error(const SourceLocation& where, const std::string& message,
             std::string hint, ErrorKind kind)
    : std::runtime_error(
          terminal_safe_lines(where.file.empty() ? message : where.str() + ": " + message)),
      hint_(terminal_safe_lines(hint)),
      kind_(kind) {}

}  // namespace runner
