// Where the ranks of one data-parallel run meet. No LibTorch in this header.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace runner {

/// A c10d store every rank of a run can reach, and this rank's place.
///  - Ranks started by runner on this machine: a FileStore on `store_path`
///    (a file every rank can open), so no port has to be chosen.
///  - Ranks started by a launcher (torchrun, a SLURM step, a PyTorchJob):
///    a TCPStore at host:port, served by rank 0's runner (or by torchrun's
///    agent when `agent_store`), with this run's keys under `prefix`.
struct Rendezvous {
  std::string store_path;  ///< FileStore when not empty
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{60000};  ///< rendezvous and each collective
  std::string host;        ///< TCPStore host (store_path empty)
  int port = 0;            ///< TCPStore port
  std::string prefix;      ///< keys of this run ("run/3/"), TCPStore only
  int local_rank = -1;     ///< on its machine (its CUDA device); -1: the rank
};

}  // namespace runner
