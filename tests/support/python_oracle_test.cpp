// The oracle the parity tests compare against is the torch LibTorch came from.
#include <torch/version.h>

#include "support/python_oracle.hpp"

namespace {

TEST(PythonOracle, RunsScriptsWithTheSameTorchAsTheBuild) {
  RUNNER_REQUIRE_ORACLE("torch");
  const auto r = runner::test::run_oracle("versions.py", {});
  ASSERT_EQ(r.code, 0) << r.output;
  // "2.14.1+cu130" from Python, "2.14.1" from LibTorch's header.
  EXPECT_EQ(r.output.rfind("torch " TORCH_VERSION, 0), 0u) << r.output;
}

TEST(PythonOracle, AMissingModuleIsReportedNotFatal) {
  RUNNER_REQUIRE_ORACLE("torch");
  EXPECT_NE(runner::test::oracle_missing("no_such_module_for_runner"), "");
  EXPECT_EQ(runner::test::oracle_missing("torch"), "");
}

}  // namespace
