// c10d process groups for data-parallel runs. The only code that includes
// ProcessGroupGloo.hpp (which needs Gloo's headers; see
// cmake/RunnerDependencies.cmake) and ProcessGroupNCCL.hpp.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <string>

#include "runner/engine/rendezvous.hpp"

namespace c10d {
class ProcessGroup;
class Store;
}  // namespace c10d

namespace runner {

/// Connects to the run's store: the FileStore, or the TCPStore (a client;
/// its server is rank 0's runner or torchrun's agent) with the run's prefix.
/// Throws runner::Error (run kind) when the TCPStore cannot be reached
/// within the timeout, naming host and port.
[[nodiscard]] c10::intrusive_ptr<c10d::Store> connect_store(const Rendezvous& rendezvous);

class RankLink;
/// The store a RankLink is connected to (for the process group of its run).
[[nodiscard]] c10::intrusive_ptr<c10d::Store> store_of(const RankLink& link);

/// A process group of `backend` ("gloo": CPU tensors over TCP on loopback;
/// "nccl": CUDA tensors, one device per rank). Blocks until every rank has
/// joined or the timeout passes. Throws runner::Error (run kind) when the
/// backend is not in this build, with what to do.
[[nodiscard]] c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const std::string& backend, const Rendezvous& rendezvous);
/// The same over a store already connected (connect_store).
[[nodiscard]] c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const std::string& backend, const Rendezvous& rendezvous,
    const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace runner
