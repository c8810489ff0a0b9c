// The run process's environment: CPU lists, allocator look-up, what needs a
// fresh process, the environment it gets, and applying and reading back
// affinity, NUMA binding and variables (in forked children, so the test
// process itself stays unbound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <fstream>

#include "runner/common/error.hpp"
#include "runner/process/isolation.hpp"
#include "runner/runtime/runtime.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

TEST(CpuList, ParsesWhatTheKernelWrites) {
  EXPECT_EQ(parse_cpu_list("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_cpu_list("5,0-1, 3"), (std::vector<int>{0, 1, 3, 5}));
  EXPECT_EQ(parse_cpu_list("2,2,2-2"), std::vector<int>{2});
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({3, 1, 2}), "1-3");
  EXPECT_EQ(format_cpu_list(parse_cpu_list("7,0-2,4")), "0-2,4,7");
}

TEST(CpuList, RefusesWhatIsNotOne) {
  EXPECT_THROW_MSG(static_cast<void>(parse_cpu_list("")), Error, "the CPU list is empty");
  EXPECT_THROW_MSG(static_cast<void>(parse_cpu_list("a")), Error, "'a' is not a CPU list: 'a' is not a CPU number");
  EXPECT_THROW_MSG(static_cast<void>(parse_cpu_list("1-")), Error, "'1-' is not a CPU list: '' is not a CPU number");
  EXPECT_THROW_MSG(static_cast<void>(parse_cpu_list("-1")), Error, "'-1' is not a CPU list: '' is not a CPU number");
  EXPECT_THROW_MSG(static_cast<void>(parse_cpu_list("4-2")), Error,
                   "'4-2' is not a CPU list: the range '4-2' runs backwards");
  EXPECT_THROW_MSG(static_cast<void>(parse_cpu_list("99999")), Error,
                   "'99999' is not a CPU list: '99999' is not a CPU number");
}

class AllocatorLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("runner_runtime_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "empty");
    fs::create_directories(dir_ / "lib");
    std::ofstream(dir_ / "lib" / "libjemalloc.so.2") << "not really";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(AllocatorLookup, FindsTheLibraryInTheFoldersGiven) {
  EXPECT_EQ(find_allocator_library("jemalloc", {dir_ / "empty", dir_ / "lib"}),
            dir_ / "lib" / "libjemalloc.so.2");
  EXPECT_FALSE(find_allocator_library("tcmalloc", {dir_ / "empty", dir_ / "lib"}));
  EXPECT_FALSE(find_allocator_library("system", {dir_ / "lib"}));
  EXPECT_FALSE(find_allocator_library("unknown", {dir_ / "lib"}));
}

TEST_F(AllocatorLookup, AMissingAllocatorNamesItsPackage) {
  const auto [message, hint] = allocator_missing("tcmalloc");
  EXPECT_EQ(message,
            "runtime.allocator = \"tcmalloc\" needs libtcmalloc_minimal.so.4, which is not installed");
  EXPECT_EQ(hint, "install the Debian package libtcmalloc-minimal4 (apt-get install "
                  "libtcmalloc-minimal4; 'scripts/dev setup' installs it)");
  EXPECT_EQ(allocator_names(), (std::vector<std::string>{"system", "jemalloc", "tcmalloc"}));
}

TEST(FreshProcess, OnlyAChangedEnvironmentNeedsOne) {
  ::setenv("RUNNER_RUNTIME_TEST_VAR", "same", 1);
  EXPECT_TRUE(fresh_process_reasons({{"RUNNER_RUNTIME_TEST_VAR", "same"}}, "system").empty());
  EXPECT_EQ(fresh_process_reasons({{"RUNNER_RUNTIME_TEST_VAR", "other"}}, "system"),
            std::vector<std::string>{"[env] RUNNER_RUNTIME_TEST_VAR"});
  EXPECT_EQ(fresh_process_reasons({{"RUNNER_RUNTIME_TEST_UNSET", ""}}, "jemalloc"),
            (std::vector<std::string>{"[env] RUNNER_RUNTIME_TEST_UNSET", "allocator jemalloc"}));
  ::unsetenv("RUNNER_RUNTIME_TEST_VAR");
}

TEST(FreshProcess, ItsEnvironmentHasTheVariablesAndTheAllocatorFirst) {
  ::setenv("LD_PRELOAD", "/opt/other.so", 1);
  const auto env = fresh_process_environment({{"OMP_NUM_THREADS", "3"}}, "jemalloc");
  ::unsetenv("LD_PRELOAD");
  const auto has = [&](const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
  };
  EXPECT_TRUE(has("OMP_NUM_THREADS=3"));
  const auto library = find_allocator_library("jemalloc");
  ASSERT_TRUE(library) << "scripts/dev setup installs libjemalloc2";
  EXPECT_TRUE(has("LD_PRELOAD=" + library->string() + " /opt/other.so"));
  EXPECT_TRUE(has("PATH=" + std::string(std::getenv("PATH"))));
}

// Runs `body` in a forked child and returns what it said: "ok" or the error.
std::string in_child(const std::function<void()>& body) {
  return capture_in_child([&]() -> std::string {
    try {
      body();
      return "ok";
    } catch (const Error& e) {
      return e.what();
    }
  });
}

TEST(RuntimeReadBack, AffinityIsAppliedAndReadBack) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  RuntimeRequest request;
  request.cpus = {cpus.back()};
  EXPECT_EQ(in_child([&] {
              apply_runtime(request);
              verify_runtime(request);
              if (allowed_cpus() != request.cpus) throw Error("not bound");
            }),
            "ok");
  // Not applied: the read-back says what the process runs on instead.
  if (cpus.size() > 1) {
    EXPECT_EQ(in_child([&] { verify_runtime(request); }),
              "the run process runs on CPUs " + format_cpu_list(cpus) + ", not " +
                  std::to_string(cpus.back()) + " as [runtime] asks");
  }
  EXPECT_EQ(allowed_cpus(), cpus);  // this process was never bound
}

TEST(RuntimeReadBack, NumaBindingIsAppliedAndReadBack) {
  const auto nodes = numa_nodes();
  if (nodes.empty()) GTEST_SKIP() << "the kernel reports no NUMA nodes";
  RuntimeRequest request;
  request.numa_node = nodes.begin()->first;
  EXPECT_EQ(in_child([&] {
              apply_runtime(request);
              verify_runtime(request);
              if (allowed_cpus() != nodes.begin()->second) throw Error("CPUs not bound to the node");
            }),
            "ok");
  EXPECT_EQ(in_child([&] { verify_runtime(request); }),
            "the run process's memory is not bound to a NUMA node, not to node " +
                std::to_string(request.numa_node));
  EXPECT_TRUE(numa_binding().empty());
}

TEST(RuntimeReadBack, VariablesAndTheAllocatorAreReadBack) {
  RuntimeRequest request;
  request.env = {{"RUNNER_RUNTIME_TEST_UNSET", "1"}};
  EXPECT_EQ(in_child([&] { verify_runtime(request); }),
            "[env] RUNNER_RUNTIME_TEST_UNSET is unset in the run process, not \"1\"");
  EXPECT_EQ(in_child([&] {
              ::setenv("RUNNER_RUNTIME_TEST_UNSET", "1", 1);
              verify_runtime(request);
            }),
            "ok");
  // This process did not preload jemalloc: malloc comes from elsewhere.
  RuntimeRequest allocator;
  allocator.allocator = "jemalloc";
  const std::string malloc_from = malloc_library();
  EXPECT_FALSE(malloc_from.empty());
  EXPECT_EQ(in_child([&] { verify_runtime(allocator); }),
            "allocator \"jemalloc\" did not take effect: malloc resolves to " + malloc_from +
                ", not " + find_allocator_library("jemalloc").value_or("?").string());
}

TEST(EnvironmentNames, AreLettersDigitsAndUnderscores) {
  EXPECT_TRUE(is_environment_name("OMP_NUM_THREADS"));
  EXPECT_TRUE(is_environment_name("_x1"));
  EXPECT_FALSE(is_environment_name(""));
  EXPECT_FALSE(is_environment_name("1X"));
  EXPECT_FALSE(is_environment_name("A-B"));
  EXPECT_FALSE(is_environment_name("A=B"));
}

}  // namespace
}  // namespace runner
