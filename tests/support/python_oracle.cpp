#include "support/python_oracle.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <map>

namespace runner::test {
namespace {

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

OracleResult capture(const std::string& command) {
  OracleResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

std::filesystem::path oracle_python() { return RUNNER_PYTHON; }

std::string oracle_missing(const std::string& modules) {
  static std::map<std::string, std::string> cache;
  if (const auto it = cache.find(modules); it != cache.end()) return it->second;
  std::string missing;
  const std::filesystem::path python = oracle_python();
  std::error_code ec;
  if (python.empty() || !std::filesystem::exists(python, ec)) {
    missing = "no Python oracle in this build (RUNNER_PYTHON is empty)";
  } else {
    const OracleResult r =
        capture(shell_quote(python.string()) + " -c " + shell_quote("import " + modules));
    if (r.code != 0) missing = "the Python oracle cannot import " + modules + ": " + r.output;
  }
  return cache[modules] = missing;
}

OracleResult run_project_script(const std::string& script, const std::vector<std::string>& args) {
  std::string command = shell_quote(oracle_python().string()) + " " +
                        shell_quote((std::filesystem::path(RUNNER_SOURCE_DIR) / script).string());
  for (const auto& arg : args) command += " " + shell_quote(arg);
  return capture(command);
}

OracleResult run_oracle(const std::string& script, const std::vector<std::string>& args) {
  return run_project_script("tests/oracle/" + script, args);
}

}  // namespace runner::test
