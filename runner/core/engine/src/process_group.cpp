// c10d process groups (Gloo, NCCL) for data-parallel runs (process_group.hpp).
#include "runner/engine/process_group.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef RUNNER_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef RUNNER_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>

#include "runner/common/error.hpp"

namespace runner {

c10::intrusive_ptr<c10d::Store> connect_store(const Rendezvous& rendezvous) {
  if (!rendezvous.store_path.empty()) {
    auto store = c10::make_intrusive<c10d::FileStore>(rendezvous.store_path, rendezvous.world_size);
    store->setTimeout(rendezvous.timeout);
    return store;
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(rendezvous.port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = rendezvous.timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(rendezvous.host, options);
  } catch (const std::exception& e) {
    const auto seconds = static_cast<double>(rendezvous.timeout.count()) / 1000.0;
    std::string why = e.what();
    if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
      why = c10_error->what_without_backtrace();
    throw Error("rank " + std::to_string(rendezvous.rank) + " cannot reach the rendezvous store at " +
                    rendezvous.host + ":" + std::to_string(rendezvous.port) + " within " +
                    std::to_string(static_cast<long long>(seconds)) + " s: " +
                    why.substr(0, why.find('\n')),
                "check MASTER_ADDR and MASTER_PORT, and that rank 0 is running and reachable",
                ErrorKind::run);
  }
  return c10::make_intrusive<c10d::PrefixStore>(rendezvous.prefix, store);
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const std::string& backend,
                                                          const Rendezvous& rendezvous) {
  return make_process_group(backend, rendezvous, connect_store(rendezvous));
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const std::string& backend, const Rendezvous& rendezvous,
    const c10::intrusive_ptr<c10d::Store>& store) {
  if (backend != "gloo" && backend != "nccl")
    throw Error("unknown process group backend '" + backend + "'", "use \"gloo\" or \"nccl\"",
                ErrorKind::run);
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rendezvous.rank,
                                                       rendezvous.world_size);
  if (backend == "gloo") {
#ifdef RUNNER_WITH_GLOO
    auto options = c10d::ProcessGroupGloo::Options::create(rendezvous.timeout);
    // Ranks started by runner are processes on this machine: loopback. Ranks
    // of a launched job reach each other as PyTorch's do: the interface
    // GLOO_SOCKET_IFNAME names, else the address this host's name resolves to.
    if (!rendezvous.store_path.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rendezvous.rank,
                                                            rendezvous.world_size, options);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    // Gloo also reduces CUDA tensors (through host copies), as PyTorch's gloo
    // group does: a data-parallel run on GPUs without NCCL, or several ranks
    // sharing one GPU, which NCCL refuses.
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
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
