// Probe: c10d::ProcessGroupGloo from a C++ program on CPU.
//
// Builds only where Gloo's headers are found (the torch wheel does not ship
// them; tests/probes/CMakeLists.txt checks at configure time). Runs two ranks
// as two threads of this process, each with its own FileStore on a shared
// file and a Gloo TCP device on 127.0.0.1, and checks allreduce and broadcast
// results. Every blocking step is bounded by kTimeout.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "probe_common.hpp"

namespace {

constexpr std::string_view kProbe = "c10d_gloo";
constexpr std::chrono::milliseconds kTimeout{10000};
constexpr int kWorld = 2;

void run_rank(const std::string& store_path, int rank, std::string& error) {
  try {
    auto store = c10::make_intrusive<c10d::FileStore>(store_path, kWorld);
    store->setTimeout(kTimeout);
    auto opts = c10d::ProcessGroupGloo::Options::create(kTimeout);
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, kWorld, opts);
    probe::expect(pg->getBackendName() == "gloo", "unexpected backend name " + pg->getBackendName());

    // allreduce(SUM) of (rank + 1) over two ranks = 1 + 2 = 3 everywhere.
    std::vector<at::Tensor> sum{at::full({8}, static_cast<float>(rank + 1))};
    probe::expect(pg->allreduce(sum)->wait(kTimeout), "allreduce wait() returned false");
    probe::expect(sum[0].min().item<float>() == 3.0f && sum[0].max().item<float>() == 3.0f,
                  "allreduce(SUM) gave a wrong result on rank " + std::to_string(rank));

    // broadcast from rank 1.
    std::vector<at::Tensor> bcast{at::full({3}, static_cast<float>(10 * rank))};
    c10d::BroadcastOptions bopts;
    bopts.rootRank = 1;
    probe::expect(pg->broadcast(bcast, bopts)->wait(kTimeout), "broadcast wait() returned false");
    probe::expect(bcast[0].min().item<float>() == 10.0f && bcast[0].max().item<float>() == 10.0f,
                  "broadcast gave a wrong result on rank " + std::to_string(rank));

    probe::expect(pg->barrier()->wait(kTimeout), "barrier wait() returned false");
  } catch (const std::exception& e) {
    error = "rank " + std::to_string(rank) + ": " + e.what();
  }
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path store_path =
      fs::temp_directory_path() / ("runner-probe-gloo-" + std::to_string(::getpid()) + ".store");
  fs::remove(store_path);

  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back(run_rank, store_path.string(), r, std::ref(errors[r]));
  }
  for (auto& t : ranks) t.join();
  std::error_code ignored;
  fs::remove(store_path, ignored);

  for (const auto& e : errors) {
    if (!e.empty()) probe::fail(kProbe, e);
  }
  probe::say(kProbe, "OK: 2 ranks (threads) over FileStore + Gloo TCP on 127.0.0.1: allreduce, broadcast, barrier");
  return 0;
}
