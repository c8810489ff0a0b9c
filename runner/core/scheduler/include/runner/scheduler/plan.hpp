// The order in which a sweep's runs execute, which of them a shard owns, and
// which are skipped on resume. No LibTorch, no I/O: unit-tested directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/store/store.hpp"

namespace runner {

/// One run of the plan: trial index (expansion order) and repetition.
struct PlannedRun {
  std::size_t trial = 0;
  std::int64_t repeat = 0;
};

/// Repetitions interleaved across trials: A1 B1 C1 A2 B2 C2 ... With
/// `shuffle`, the trial order of every round is a fresh permutation drawn
/// from a generator seeded with `seed`, so slow drift of the machine does not
/// favour the trial that always comes first.
[[nodiscard]] std::vector<PlannedRun> interleave(std::size_t trials, std::int64_t repeats,
                                                 bool shuffle, std::uint64_t seed);
/// The same for trials with their own number of repetitions (several
/// experiment files in one schedule): round r holds every trial with more
/// than r repetitions. With equal counts it is the plan above.
[[nodiscard]] std::vector<PlannedRun> interleave(const std::vector<std::int64_t>& repeats,
                                                 bool shuffle, std::uint64_t seed);

/// A deterministic slice of the runs: shard `index` (1-based) of `count`.
struct Shard {
  std::int64_t index = 1;
  std::int64_t count = 1;
};

/// Parses "K/N" (1 <= K <= N). Throws runner::Error (input) otherwise.
[[nodiscard]] Shard parse_shard(const std::string& text);

/// True if the run (trial identity, repetition) belongs to the shard: a hash
/// of both modulo N, so every shard gets about 1/N of the runs and the
/// assignment never depends on which other runs exist.
[[nodiscard]] bool in_shard(const std::string& identity, std::int64_t repeat, const Shard& shard);

/// What to do with runs that already exist.
enum class ResumePolicy {
  missing,       ///< default: run what has no finished or failed record (interrupted runs are rerun)
  rerun_failed,  ///< also rerun failed, crashed, timeout and diverged runs
  force,         ///< run everything again
};

/// Why a planned run is skipped ("finished as run 12"), or "" to run it.
[[nodiscard]] std::string skip_reason(const std::vector<store::TrialRun>& existing,
                                      std::int64_t repeat, ResumePolicy policy);

/// Trial identity: SHA-256 over the resolved-config hash, the SHA-256 of
/// every plugin library the trial uses (kind:name:sha256, sorted) and the
/// hash of the environment fingerprint that joins the identity
/// (identity_fingerprint; empty: none), so a rebuilt plugin, an upgraded
/// LibTorch or a changed environment variable makes a new trial.
[[nodiscard]] std::string trial_identity(const std::string& config_hash,
                                         const std::vector<store::PluginRecord>& plugins,
                                         const std::string& environment_hash = {});

}  // namespace runner
