// A data-parallel ([distributed]) run: rank 0 here (rank_run.cpp) and the
// other ranks forked from it or started by a launcher, each a worker that
// repeats rank 0's steps; and, when the run fails, which rank failed first
// and why.
#include "distributed.hpp"

#include <unistd.h>

#include <torch/utils.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "device.hpp"
#include "errors.hpp"
#include "loops.hpp"
#include "rank_run.hpp"
#include "runner/engine/phase_clock.hpp"
#include "runner/engine/ranks.hpp"
#include "runner/process/isolation.hpp"

namespace runner {
namespace {

// The steps the other ranks run without hearing from rank 0: all of them
// when the warm-up is a fixed count; with "auto" warm-up, until rank 0 ends
// the run (its process group closes and the next collective fails).
std::int64_t steps_to_run(const Experiment& exp) {
  if (exp.train.warmup < 0) return std::numeric_limits<std::int64_t>::max();
  return exp.train.warmup + exp.profile.steps + exp.train.steps;
}

// Ranks 1..N-1: the same steps as rank 0, each timed for the straggler
// figures but not recorded, until the count rank 0 ran. Returns "" when the
// run ended normally, else this rank's failure. A failure caused by another
// rank (a collective broken because that rank died or failed) returns ""
// when `quiet_when_caused` (rank 0 reports the cause), else the cause.
std::string run_worker(const RunRequest& request, const Rendezvous& rendezvous,
                       const Companions* companions) {
  const Experiment& exp = *request.experiment;
  std::unique_ptr<RankLink> link;
  std::vector<double> times;
  const auto end_normally = [&](std::int64_t steps) {
    times.resize(std::min(times.size(), static_cast<std::size_t>(std::max<std::int64_t>(steps, 0))));
    link->post_step_times(times);
    return std::string();
  };
  try {
    link = std::make_unique<RankLink>(rendezvous);
    const RankInfo rank{&rendezvous, link.get()};
    const std::uint64_t seed = run_seed(exp, request.repeat_index);
    torch::manual_seed(seed);
    const std::string device_name = resolve_device(exp.device.type);
    {
      Workload w;
      try {
        build(w, exp, *request.host, seed, rank_device(device_name, rank), rank);
        w.model->module().train();
        auto clock = make_phase_clock(device_name);
        mark_backward_end(w, *clock);
        // A diverging loss is rank 0's to report: the parameters are the same everywhere.
        const std::int64_t limit = steps_to_run(exp);
        for (std::int64_t step = 0; step < limit; ++step) {
          clock->begin_step();
          (void)train_step(w, *clock, step);
          times.push_back(clock->end_step().wall_ns);
        }
      } catch (const Error& e) {
        link->fail(e.what());  // before the group closes: the others read it
        throw;
      }
    }
    // Rank 0 may still evaluate or save weights: wait as long as it lives.
    for (;;) {
      if (const auto done = link->finished_steps(rendezvous.timeout)) return end_normally(*done);
      if (link->lost(0))
        return "lost " + link->describe(0) + " after this rank's last step: no heartbeat";
    }
  } catch (const Error& e) {
    if (companions != nullptr && companions->stopping()) return "";
    if (!link) return e.what();
    link->fail(e.what());
    // Forked ranks: rank 0 reports it from the store (a crash, which leaves
    // nothing there, from the rank's exit status).
    return companions != nullptr ? std::string() : std::string(e.what());
  } catch (const std::exception& e) {
    if (companions != nullptr && companions->stopping()) return "";
    if (!link) return message_of(e);
    // The usual end with "auto" warm-up: rank 0 finished and closed its group.
    if (const auto done = link->finished_steps(std::chrono::milliseconds(0)))
      return end_normally(*done);
    const std::string raw = message_of(e);
    const std::string why = link->explain_failure();
    if (const auto done = link->finished_steps(std::chrono::milliseconds(0)))
      return end_normally(*done);
    if (why.empty()) {
      link->fail(raw);
      return companions != nullptr ? std::string() : raw;
    }
    // Another rank's failure: rank 0 reports it (a forked rank stays quiet).
    if (companions != nullptr) return "";
    return why + " (rank " + std::to_string(rendezvous.rank) + ": " +
           raw.substr(0, raw.find('\n')) + ")";
  }
}

// The final error of a failed data-parallel run, from rank 0's: what the
// forked ranks reported, else what the store says about the other ranks
// (a rank's recorded failure, a rank whose heartbeat stopped).
std::string explain_distributed_failure(const RunOutcome& out, bool own_failure, RankLink* link,
                                        Companions* companions) {
  std::string why;
  if (!own_failure && link != nullptr) {
    why = link->explain_failure();  // before the forked ranks are stopped
    if (why.empty()) link->fail(out.error);
  }
  // What the store says first; then how forked ranks ended, when that says
  // more (a crash: "rank 1 was killed by signal 11 (Segmentation fault)").
  std::string error = why;
  if (companions != nullptr) {
    companions->stop();
    for (const auto& f : companions->failures()) error += (error.empty() ? "" : "; ") + f;
  }
  if (error.empty()) return out.error;
  return error + " (rank 0: " + out.error + ")";
}

}  // namespace

RunOutcome run_distributed(const RunRequest& request) {
  const Experiment& exp = *request.experiment;
  Rendezvous rendezvous;
  std::filesystem::path store;
  std::error_code ignored;
  if (request.job) {
    rendezvous = *request.job;
  } else {
    rendezvous.world_size = static_cast<int>(exp.distributed.world_size);
    rendezvous.timeout = std::chrono::milliseconds(
        static_cast<std::int64_t>(exp.distributed.timeout_s * 1000.0));
    store = std::filesystem::temp_directory_path() /
            ("runner-rendezvous-" + std::to_string(::getpid()) + ".store");
    std::filesystem::remove(store, ignored);
    rendezvous.store_path = store.string();
  }
  // Before the first rank is forked, so every rank inherits it.
  const IgnoredSignal no_broken_pipe(SIGPIPE);
  std::optional<Companions> companions;
  RunOutcome out;
  bool own_failure = false;
  std::unique_ptr<RankLink> link;
  try {
    if (!request.job) {
      companions.emplace();
      for (int r = 1; r < rendezvous.world_size; ++r) {
        Rendezvous mine = rendezvous;
        mine.rank = r;
        companions->spawn("rank " + std::to_string(r), [&request, mine, &companions] {
          return run_worker(request, mine, &*companions);
        });
      }
    }
    link = std::make_unique<RankLink>(rendezvous);
    out = run_rank(request, RankInfo{&rendezvous, link.get()}, &own_failure);
  } catch (const Error& e) {
    out.status = store::RunStatus::failed;
    out.error = e.what();
    own_failure = true;
    if (link) link->fail(out.error);
  }
  if (out.status == store::RunStatus::failed) {
    out.error = explain_distributed_failure(out, own_failure, link.get(),
                                            companions ? &*companions : nullptr);
  } else if (companions) {
    companions->stop();  // they have posted their times and are ending
    if (!companions->failures().empty() && out.status != store::RunStatus::interrupted) {
      std::string error;
      for (const auto& f : companions->failures()) error += (error.empty() ? "" : "; ") + f;
      out.status = store::RunStatus::failed;
      out.error = error;
    }
  }
  link.reset();
  if (!store.empty()) std::filesystem::remove(store, ignored);
  return out;
}

std::string execute_rank(const RunRequest& request, const Rendezvous& rendezvous) {
  const IgnoredSignal no_broken_pipe(SIGPIPE);
  return run_worker(request, rendezvous, nullptr);
}

}  // namespace runner
