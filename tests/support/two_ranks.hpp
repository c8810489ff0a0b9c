// Two ranks of a real Gloo group as two threads of the test process, meeting
// through a FileStore: the harness of the comm-hook and Reducer tests.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runner/engine/process_group.hpp"

namespace runner::test {

/// Runs `body(rank, group)` on two ranks, one thread each, once both have
/// connected (a rank whose body throws at once must not close its group
/// while the other still connects); returns their failures ("" for none).
inline std::vector<std::string> on_two_ranks(
    const std::function<void(int, const c10::intrusive_ptr<c10d::ProcessGroup>&)>& body) {
  static int counter = 0;
  namespace fs = std::filesystem;
  const fs::path store = fs::temp_directory_path() /
                         ("runner-two-ranks-" + std::to_string(::getpid()) + "-" +
                          std::to_string(counter++) + ".store");
  fs::remove(store);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      try {
        Rendezvous rendezvous;
        rendezvous.store_path = store.string();
        rendezvous.rank = rank;
        rendezvous.world_size = 2;
        rendezvous.timeout = std::chrono::milliseconds(20000);
        auto group = make_process_group("gloo", rendezvous);
        group->barrier()->wait();
        body(rank, group);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::error_code ignored;
  fs::remove(store, ignored);
  return errors;
}

}  // namespace runner::test
