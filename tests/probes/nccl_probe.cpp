// Probe: c10d::ProcessGroupNCCL.
//
// Compiling this file is the main check (ProcessGroupNCCL.hpp needs nccl.h and
// CUDA's headers; the build only registers it when LibTorch has CUDA). At run
// time it needs a CUDA device: without one it reports SKIP (exit 77). With one
// it creates a world-size-1 NCCL group over a FileStore and allreduces a CUDA
// tensor.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/cuda.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>

#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "probe_common.hpp"

namespace {

constexpr std::string_view kProbe = "c10d_nccl";
constexpr std::chrono::milliseconds kTimeout{30000};

}  // namespace

int main() {
  probe::say(kProbe, "ProcessGroupNCCL.hpp compiled; NCCL version in LibTorch: " + c10d::getNcclVersion());
  if (!torch::cuda::is_available()) {
    probe::say(kProbe, "SKIP: no CUDA device, a NCCL process group cannot run here");
    return probe::kSkip;
  }
  namespace fs = std::filesystem;
  const fs::path store_path =
      fs::temp_directory_path() / ("runner-probe-nccl-" + std::to_string(::getpid()) + ".store");
  try {
    auto store = c10::make_intrusive<c10d::FileStore>(store_path.string(), 1);
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = kTimeout;
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, 0, 1, opts);
    std::vector<at::Tensor> t{at::full({8}, 2.0f, at::TensorOptions().device(at::kCUDA, 0))};
    probe::expect(pg->allreduce(t)->wait(kTimeout), "allreduce wait() returned false");
    probe::expect(t[0].min().item<float>() == 2.0f && t[0].max().item<float>() == 2.0f,
                  "allreduce(SUM) over one rank changed the tensor");
    pg->shutdown();
  } catch (const std::exception& e) {
    std::error_code ignored;
    fs::remove(store_path, ignored);
    probe::fail(kProbe, e.what());
  }
  std::error_code ignored;
  fs::remove(store_path, ignored);
  probe::say(kProbe, "OK: world-size-1 NCCL group allreduced a CUDA tensor");
  return 0;
}
