#include "runner/engine/process_group.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#ifdef RUNNER_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef RUNNER_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "runner/common/error.hpp"

namespace runner {

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const std::string& backend,
                                                          const Rendezvous& rendezvous) {
  if (backend != "gloo" && backend != "nccl")
    throw Error("unknown process group backend '" + backend + "'", "use \"gloo\" or \"nccl\"",
                ErrorKind::run);
  auto store = c10::make_intrusive<c10d::FileStore>(rendezvous.store_path, rendezvous.world_size);
  store->setTimeout(rendezvous.timeout);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rendezvous.rank,
                                                       rendezvous.world_size);
  if (backend == "gloo") {
#ifdef RUNNER_WITH_GLOO
    auto options = c10d::ProcessGroupGloo::Options::create(rendezvous.timeout);
    // Loopback only: the ranks of a run are processes on this machine.
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rendezvous.rank,
                                                            rendezvous.world_size, options);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    return group;
#else
    throw Error("this runner was built without Gloo's headers, so it cannot create a gloo "
                "process group",
                "install them (Debian: apt-get install libgloo-dev; scripts/dev setup does) and "
                "reconfigure with `cmake -U RUNNER_HAVE_GLOO_HEADERS build`, then rebuild",
                ErrorKind::run);
#endif
  }
  // backend == "nccl"
#ifdef RUNNER_WITH_CUDA
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = rendezvous.timeout;
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rendezvous.rank,
                                                            rendezvous.world_size, options);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    return group;
#else
    throw Error("this runner was built without CUDA code paths, so it cannot create an nccl "
                "process group",
                "use [distributed] backend = \"gloo\" on the CPU, or build runner with CUDA",
                ErrorKind::run);
#endif
}

}  // namespace runner
