#include "runner/scheduler/plan.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"

namespace runner {

std::vector<PlannedRun> interleave(std::size_t trials, std::int64_t repeats, bool shuffle,
                                   std::uint64_t seed) {
  return interleave(std::vector<std::int64_t>(trials, repeats), shuffle, seed);
}

std::vector<PlannedRun> interleave(const std::vector<std::int64_t>& repeats, bool shuffle,
                                   std::uint64_t seed) {
  std::vector<PlannedRun> plan;
  std::int64_t rounds = 0;
  std::size_t total = 0;
  for (std::int64_t r : repeats) {
    rounds = std::max(rounds, r);
    total += static_cast<std::size_t>(std::max<std::int64_t>(r, 0));
  }
  plan.reserve(total);
  std::vector<std::size_t> order(repeats.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed);
  for (std::int64_t r = 0; r < rounds; ++r) {
    if (shuffle) std::shuffle(order.begin(), order.end(), generator);
    for (std::size_t t : order)
      if (r < repeats[t]) plan.push_back({t, r});
  }
  return plan;
}

Shard parse_shard(const std::string& text) {
  const auto fail = [&] {
    throw Error("--shard must be K/N with 1 <= K <= N, found '" + text + "'",
                "e.g. --shard 2/4 runs the second quarter of the runs");
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos) fail();
  const auto k = parse_int64(std::string_view(text).substr(0, slash));
  const auto n = parse_int64(std::string_view(text).substr(slash + 1));
  if (!k || !n) fail();
  Shard shard;
  shard.index = *k;
  shard.count = *n;
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) fail();
  return shard;
}

bool in_shard(const std::string& identity, std::int64_t repeat, const Shard& shard) {
  if (shard.count == 1) return true;
  const std::string digest = sha256_hex(identity + ":" + std::to_string(repeat));
  const std::uint64_t value = std::stoull(digest.substr(0, 15), nullptr, 16);
  return static_cast<std::int64_t>(value % static_cast<std::uint64_t>(shard.count)) ==
         shard.index - 1;
}

std::string skip_reason(const std::vector<store::TrialRun>& existing, std::int64_t repeat,
                        ResumePolicy policy) {
  if (policy == ResumePolicy::force) return {};
  // A finished record wins over earlier failed attempts of the same repetition.
  using store::RunStatus;
  for (const auto& run : existing)
    if (run.repeat_index == repeat && run.status == RunStatus::finished)
      return "finished as run " + std::to_string(run.run_id);
  for (const auto& run : existing) {
    if (run.repeat_index != repeat) continue;
    const bool failed = run.status == RunStatus::failed || run.status == RunStatus::crashed ||
                        run.status == RunStatus::timeout || run.status == RunStatus::diverged;
    if (failed && policy == ResumePolicy::missing)
      return to_string(run.status) + std::string(" as run ") + std::to_string(run.run_id) +
             " (--rerun-failed reruns it)";
    if (run.status == RunStatus::running)
      return "running as run " + std::to_string(run.run_id) + " in another process";
  }
  return {};
}

std::string trial_identity(const std::string& config_hash,
                           const std::vector<store::PluginRecord>& plugins,
                           const std::string& environment_hash) {
  std::vector<std::string> parts;
  for (const auto& p : plugins) parts.push_back(p.kind + ":" + p.name + ":" + p.sha256);
  std::sort(parts.begin(), parts.end());
  std::string text = config_hash;
  for (const auto& part : parts) text += "\n" + part;
  if (!environment_hash.empty()) text += "\nenvironment:" + environment_hash;
  return sha256_hex(text);
}

}  // namespace runner
