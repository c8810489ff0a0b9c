// Errors that reach the user: what is wrong, where, and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace runner {

/// Where in an experiment file a value came from (1-based line and column).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  /// "file:line:col", or just "file" when the position is unknown.
  [[nodiscard]] std::string str() const;
  [[nodiscard]] bool known() const { return line > 0; }
};

/// What an error means for the exit code: bad input exits 2, a failed run exits 1.
enum class ErrorKind { input, run };

/// The one error type the CLI reports. The message is short and lowercase
/// (fmt style); the hint says what the user can do.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string hint = {},
                 ErrorKind kind = ErrorKind::input);
  /// An error at a position in an experiment file: "file:line:col: message".
  Error(const SourceLocation& where, const std::string& message,
        std::string hint = {}, ErrorKind kind = ErrorKind::input);

  [[nodiscard]] const std::string& hint() const { return hint_; }
  [[nodiscard]] ErrorKind kind() const { return kind_; }
  [[nodiscard]] int exit_code() const { return kind_ == ErrorKind::input ? 2 : 1; }

 private:
  std::string hint_;
  ErrorKind kind_;
};

/// Exit codes of the CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;
inline constexpr int kExitBadInput = 2;

}  // namespace runner
