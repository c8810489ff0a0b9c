// The kernels plugin, as built, registers a CUDA implementation of every
// runner op: checked in the dispatcher after the host loads the library, so
// it runs on a machine without a GPU. Skipped in a build without CUDA
// (RUNNER_WITH_CUDA undefined), where the plugin has CPU kernels only.
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <runner/host/host.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kPlugin =
    std::filesystem::path(RUNNER_BINARY_DIR) / "lib/runner/plugins/runner_plugin_kernels.so";

// ops.hpp's ops: each functional form, out variant and backward.
const std::vector<c10::OperatorName> kOps = {
    {"runner::scale", ""},        {"runner::scale", "out"},
    {"runner::bias_gelu", ""},    {"runner::bias_gelu", "out"},
    {"runner::bias_gelu_backward", ""},
    {"runner::softmax", ""},      {"runner::softmax", "out"},
    {"runner::softmax_backward", ""},
    {"runner::rmsnorm", ""},      {"runner::rmsnorm", "out"},
    {"runner::rmsnorm_backward", ""},
    {"runner::layernorm", ""},    {"runner::layernorm", "out"},
    {"runner::layernorm_backward", ""},
};

std::string to_string(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

class CudaRegistration : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(RUNNER_WITH_CUDA)
    GTEST_SKIP() << "built without CUDA";
#endif
    // Loaded once per process; the host never unloads a plugin library.
    static runner::PluginHost* host = [] {
      auto* h = new runner::PluginHost();
      h->load(kPlugin);
      return h;
    }();
    (void)host;
  }
};

TEST_F(CudaRegistration, EveryOpHasACudaKernel) {
  for (const auto& name : kOps) {
    const auto op = c10::Dispatcher::singleton().findOp(name);
    ASSERT_TRUE(op.has_value()) << to_string(name) << " is not registered";
    EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
        << to_string(name) << " has no CUDA kernel";
    EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::CPU))
        << to_string(name) << " has no CPU kernel";
  }
}

TEST_F(CudaRegistration, CudaCoversExactlyTheOpsTheCpuImplements) {
  // An op the CPU side adds later without a CUDA kernel shows here.
  std::set<std::string> cpu;
  std::set<std::string> cuda;
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("runner::", 0) != 0) continue;
    const auto op = c10::Dispatcher::singleton().findOp(name);
    if (!op) continue;
    if (op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) cpu.insert(to_string(name));
    if (op->hasKernelForDispatchKey(c10::DispatchKey::CUDA)) cuda.insert(to_string(name));
  }
  EXPECT_EQ(cuda, cpu);
  EXPECT_EQ(cuda.size(), kOps.size());
}

TEST_F(CudaRegistration, ForwardOpsGoThroughAutogradOnCuda) {
  // The CPU side registers Autograd once for both devices; a CUDA tensor
  // reaches the CUDA kernel through it (AutogradCUDA falls back to Autograd).
  for (const char* name : {"runner::scale", "runner::bias_gelu", "runner::softmax",
                           "runner::rmsnorm", "runner::layernorm"}) {
    const auto op = c10::Dispatcher::singleton().findOp({name, ""});
    ASSERT_TRUE(op.has_value()) << name;
    EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::Autograd) ||
                op->hasKernelForDispatchKey(c10::DispatchKey::AutogradCUDA))
        << name << " has no Autograd kernel";
  }
}

}  // namespace
