#include "runner/common/error.hpp"

#include <utility>

namespace runner {

std::string SourceLocation::str() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

Error::Error(const std::string& message, std::string hint, ErrorKind kind)
    : std::runtime_error(message), hint_(std::move(hint)), kind_(kind) {}

Error::Error(const SourceLocation& where, const std::string& message,
             std::string hint, ErrorKind kind)
    : std::runtime_error(where.file.empty() ? message : where.str() + ": " + message),
      hint_(std::move(hint)),
      kind_(kind) {}

}  // namespace runner
