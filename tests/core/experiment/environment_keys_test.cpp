// [env] and [runtime]: values, identity (experiments without them keep their
// hashes), sweeps and --set over environment variables, and the errors of
// each at file:line:col.
#include "experiment_fixture.hpp"
#include "runner/runtime/runtime.hpp"

namespace runner {
namespace {

class EnvironmentKeysTest : public test::ExperimentFixture {};

TEST_F(EnvironmentKeysTest, AbsentSectionsChangeNothingInTheIdentity) {
  const Experiment plain = load(test::kMinimal);
  EXPECT_TRUE(plain.env.empty());
  EXPECT_TRUE(plain.runtime.is_default());
  const Experiment spelled =
      load(test::kMinimal + "[runtime]\nallocator = \"system\"\n[env]\n");
  EXPECT_EQ(spelled.config_hash(), plain.config_hash());
  EXPECT_EQ(plain.resolved_json().find("env"), std::string::npos);
  EXPECT_EQ(plain.resolved_json().find("runtime"), std::string::npos);
}

TEST_F(EnvironmentKeysTest, ValuesReachTheExperimentAndTheIdentity) {
  const Experiment e = load(test::kMinimal +
                            "[env]\nOMP_NUM_THREADS = \"1\"\nMALLOC_CONF = \"background_thread:true\"\n"
                            "[runtime]\nallocator = \"system\"\ncpu_affinity = \"0\"\n"
                            "numa_node = 0\nthreads = 1\ninterop_threads = 1\n");
  EXPECT_EQ(e.env.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(e.env.at("MALLOC_CONF"), "background_thread:true");
  EXPECT_EQ(e.runtime.cpu_affinity, "0");
  EXPECT_EQ(e.runtime.numa_node, 0);
  // [runtime] threads is [device] threads.
  EXPECT_EQ(e.device.threads, 1);
  EXPECT_EQ(e.device.interop_threads, 1);
  const RuntimeRequest request = e.runtime_request();
  EXPECT_EQ(request.cpus, std::vector<int>{0});
  EXPECT_EQ(request.numa_node, 0);
  EXPECT_EQ(request.env, e.env);

  const std::string plain = load(test::kMinimal).config_hash();
  std::vector<std::string> hashes{plain};
  for (const std::string& extra :
       {std::string("[env]\nOMP_NUM_THREADS = \"1\"\n"), std::string("[env]\nOMP_NUM_THREADS = \"2\"\n"),
        std::string("[runtime]\ncpu_affinity = \"0\"\n"), std::string("[runtime]\nnuma_node = 0\n")}) {
    hashes.push_back(load(test::kMinimal + extra).config_hash());
    for (std::size_t i = 0; i + 1 < hashes.size(); ++i) EXPECT_NE(hashes[i], hashes.back()) << extra;
  }
  // The same thread count, written in either section, is the same trial.
  EXPECT_EQ(load(test::kMinimal + "[runtime]\nthreads = 2\n").config_hash(),
            load(test::kMinimal + "[device]\nthreads = 2\n").config_hash());
}

TEST_F(EnvironmentKeysTest, CpuListsAreNormalised) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const std::string first = std::to_string(cpus.front());
  // "0,0" and "0-0" name the same CPU: one trial.
  const Experiment a = load(test::kMinimal + "[runtime]\ncpu_affinity = \"" + first + "," +
                            first + "\"\n");
  const Experiment b = load(test::kMinimal + "[runtime]\ncpu_affinity = \"" + first + "-" +
                            first + "\"\n");
  EXPECT_EQ(a.runtime.cpu_affinity, first);
  EXPECT_EQ(a.config_hash(), b.config_hash());
}

TEST_F(EnvironmentKeysTest, EnvironmentVariablesSweepAndTakeTextFromSet) {
  const auto trials = expand(test::kMinimal + "[sweep]\n\"env.OMP_NUM_THREADS\" = [\"1\", \"2\"]\n");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].experiment.env.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(trials[1].experiment.env.at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(trials[1].label, "env.OMP_NUM_THREADS=\"2\"");
  // --set env.X=1 is the string "1", as is a quoted one.
  EXPECT_EQ(expand(test::kMinimal, {"env.OMP_NUM_THREADS=1"})[0].experiment.env.at("OMP_NUM_THREADS"),
            "1");
  EXPECT_EQ(expand(test::kMinimal, {"env.X=\"a b\""})[0].experiment.env.at("X"), "a b");
  EXPECT_EQ(expand(test::kMinimal, {"runtime.cpu_affinity=" + std::to_string(allowed_cpus().front())})[0]
                .experiment.runtime.cpu_affinity,
            std::to_string(allowed_cpus().front()));
}

TEST_F(EnvironmentKeysTest, BadEnvironmentValuesAreRefusedWhereTheyAre) {
  const std::string head = test::kMinimal + "[env]\n";
  Error e = error_of(head + "OMP_NUM_THREADS = 1\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 19) + "'env.OMP_NUM_THREADS' must be a string, found an integer");
  EXPECT_EQ(e.hint(), "environment values are text: write OMP_NUM_THREADS = \"1\"");
  e = error_of(head + "\"A-B\" = \"1\"\n");
  EXPECT_EQ(std::string(e.what()), at(9, 1) + "'env.A-B' is not an environment variable name");
  e = error_of(head + "RUNNER_PLUGIN_PATH = \"/x\"\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 1) + "'env.RUNNER_PLUGIN_PATH' is a setting of runner itself, not of a run");
  EXPECT_EQ(e.hint(), "set it in the shell that starts runner");
  e = error_of(head + "X = [\"1\"]\n");
  EXPECT_EQ(std::string(e.what()), at(9, 5) + "'env.X' must be a string, found an array");
  e = error_of(head + "X = \"a\\u0000b\"\n");
  EXPECT_EQ(std::string(e.what()), at(9, 5) + "'env.X' must not contain a NUL character");
}

TEST_F(EnvironmentKeysTest, BadRuntimeValuesAreRefusedWhereTheyAre) {
  const std::string head = test::kMinimal + "[runtime]\n";
  Error e = error_of(head + "allocator = \"hoard\"\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 13) + "'runtime.allocator' must be one of \"system\", \"jemalloc\", \"tcmalloc\", "
                        "found \"hoard\"");
  e = error_of(head + "cpu_affinity = \"0-x\"\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 16) + "'runtime.cpu_affinity': '0-x' is not a CPU list: 'x' is not a CPU number");
  e = error_of(head + "cpu_affinity = \"3-1\"\n");
  EXPECT_EQ(std::string(e.what()), at(9, 16) + "'runtime.cpu_affinity': '3-1' is not a CPU list: "
                                               "the range '3-1' runs backwards");
  // A CPU the machine does not have (CPU_SETSIZE is beyond any machine here).
  e = error_of(head + "cpu_affinity = \"4000\"\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 16) + "'runtime.cpu_affinity' names CPU 4000, which this machine does not have "
                        "(runner may use CPUs " + format_cpu_list(allowed_cpus()) + ")");
  EXPECT_EQ(e.hint(), "name CPUs from " + format_cpu_list(allowed_cpus()));
  e = error_of(head + "numa_node = 1000\n");
  const auto nodes = numa_nodes();
  std::vector<int> names;
  for (const auto& [node, cpus] : nodes) names.push_back(node);
  EXPECT_EQ(std::string(e.what()),
            at(9, 13) + "'runtime.numa_node' is 1000, but " +
                (nodes.empty() ? std::string("the kernel reports no NUMA nodes on this machine")
                               : "this machine has NUMA node(s) " + format_cpu_list(names)));
  e = error_of(head + "threads = 2\n[device]\nthreads = 2\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 11) + "'runtime.threads' and 'device.threads' are the same setting; set it once");
  e = error_of(head + "cpu_affinity = 1\n");
  EXPECT_EQ(std::string(e.what()),
            at(9, 16) + "'runtime.cpu_affinity' must be a string, found an integer");
}

TEST_F(EnvironmentKeysTest, InstalledAllocatorsAreAccepted) {
  // scripts/dev setup installs both (libjemalloc2, libtcmalloc-minimal4); the
  // message for a missing one is tested with the runtime layer.
  for (const std::string name : {"jemalloc", "tcmalloc"}) {
    ASSERT_TRUE(find_allocator_library(name).has_value()) << name << " is not installed";
    const std::string text = test::kMinimal + "[runtime]\nallocator = \"" + name + "\"\n";
    if (allocator_preload_possible()) {
      EXPECT_EQ(load(text).runtime.allocator, name);
    } else {  // an AddressSanitizer build
      EXPECT_EQ(std::string(error_of(text).what()),
                at(9, 13) + "runtime.allocator = \"" + name +
                    "\" cannot be preloaded into this runner: it is built with AddressSanitizer, "
                    "which replaces malloc itself");
    }
  }
}

}  // namespace
}  // namespace runner
