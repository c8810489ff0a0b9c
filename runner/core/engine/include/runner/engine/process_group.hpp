// c10d process groups for data-parallel runs. The only code that includes
// ProcessGroupGloo.hpp (which needs Gloo's headers; see
// cmake/RunnerDependencies.cmake) and ProcessGroupNCCL.hpp.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <string>

namespace c10d {
class ProcessGroup;
}  // namespace c10d

namespace runner {

/// Where the ranks of one run meet: a c10d FileStore on `store_path` (a file
/// every rank can open), so no port has to be chosen.
struct Rendezvous {
  std::string store_path;
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{60000};  ///< rendezvous and each collective
};

/// A process group of `backend` ("gloo": CPU tensors over TCP on loopback;
/// "nccl": CUDA tensors, one device per rank). Blocks until every rank has
/// joined or the timeout passes. Throws runner::Error (run kind) when the
/// backend is not in this build, with what to do.
[[nodiscard]] c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const std::string& backend, const Rendezvous& rendezvous);

}  // namespace runner
