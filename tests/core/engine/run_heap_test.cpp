// The run process's heap keeps the memory a step frees for the next step
// (configure_runtime, issue 30): without it glibc returned the freed top of
// its heap to the kernel after every step, and the next step paid a page fault
// for every page of its activations again (10 % of a convnet step).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine_fixture.hpp"

namespace runner {
namespace {

// 96 MiB a "step": more than any trim threshold glibc picks by itself (64 MiB at most).
constexpr std::int64_t kBlocks = 24;
constexpr std::int64_t kBlockFloats = 1 << 20;
constexpr std::int64_t kPagesPerStep = kBlocks * kBlockFloats * 4 / 4096;

std::int64_t minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// Three "steps" that allocate and write 24 activations of 4 MiB each and free
// them at the end, as a training step does; the page faults of the third.
std::int64_t faults_of_a_later_step() {
  std::int64_t faults = 0;
  for (int step = 0; step < 3; ++step) {
    const std::int64_t before = minor_faults();
    {
      std::vector<torch::Tensor> activations;
      for (std::int64_t i = 0; i < kBlocks; ++i)
        activations.push_back(torch::empty({kBlockFloats}).fill_(1.0F));
    }
    faults = minor_faults() - before;
  }
  return faults;
}

TEST(RunHeap, AStepReusesThePagesThePreviousStepFreed) {
  Experiment e = test::mlp_sgd("heap", 1);
  e.device.threads = 1;
  configure_runtime(e);
  EXPECT_LT(faults_of_a_later_step(), kPagesPerStep / 10);
}

TEST(RunHeap, AUsersOwnMallocSettingIsLeftAlone) {
  // Set after glibc read its environment, so glibc's defaults stay in force:
  // runner must not replace them either.
  ::setenv("MALLOC_TRIM_THRESHOLD_", "0", 1);
  Experiment e = test::mlp_sgd("heap", 1);
  e.device.threads = 1;
  configure_runtime(e);
  // glibc's defaults give a third of the pages back each step here (8,192 faults).
  EXPECT_GT(faults_of_a_later_step(), kPagesPerStep / 5);
}

}  // namespace
}  // namespace runner
