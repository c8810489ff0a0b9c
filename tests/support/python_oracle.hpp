// The Python oracle of the parity tests: the interpreter whose torch (and
// torchvision) define what runner's models, optimizers and precision modes
// must compute. Scripts live in tests/oracle/; they write reference files
// (state dicts, inputs, outputs) that the C++ side compares against.
//
//   TEST(ResNetParity, ...) {
//     RUNNER_REQUIRE_ORACLE("torchvision");   // skips cleanly without it
//     const auto r = runner::test::run_oracle("resnet_reference.py", {"--out", dir});
//     ASSERT_EQ(r.code, 0) << r.output;
//   }
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace runner::test {

/// The oracle's interpreter (the build's RUNNER_PYTHON), or empty.
[[nodiscard]] std::filesystem::path oracle_python();

/// An empty string if the oracle can import every module in `modules`
/// (comma-separated, e.g. "torch,torchvision"), else why not.
[[nodiscard]] std::string oracle_missing(const std::string& modules);

/// What an oracle script did.
struct OracleResult {
  int code = -1;          ///< exit code (-1: did not run)
  std::string output;     ///< stdout and stderr together
};

/// Runs tests/oracle/`script` with `args` (each passed as one argument).
[[nodiscard]] OracleResult run_oracle(const std::string& script,
                                      const std::vector<std::string>& args);

/// Runs the project's `script` (a path under the source folder, e.g.
/// "scripts/make_datasets.py") with the oracle's interpreter.
[[nodiscard]] OracleResult run_project_script(const std::string& script,
                                              const std::vector<std::string>& args);

}  // namespace runner::test

/// Skips the test (GTEST_SKIP) unless the oracle imports `modules`.
#define RUNNER_REQUIRE_ORACLE(modules)                                                  \
  do {                                                                                 \
    const std::string runner_oracle_missing_ = ::runner::test::oracle_missing(modules); \
    if (!runner_oracle_missing_.empty()) GTEST_SKIP() << runner_oracle_missing_;        \
  } while (false)
