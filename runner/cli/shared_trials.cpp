#include "shared_trials.hpp"

#include <map>
#include <optional>
#include <utility>

#include "trial_names.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

using TrialKey = std::pair<std::size_t, std::size_t>;  // (experiment file, trial)

struct Planned {
  std::optional<std::int64_t> id;        // the trial's row, once recorded
  std::optional<TrialKey> shared_with;   // the earlier file's trial that runs it
  std::int64_t shared = 0;               // of its planned repetitions, those shared
};

std::string runs(std::int64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "run" : "runs") + " shared";
}

}  // namespace

std::vector<std::string> sharing_lines(const Sweep& sweep,
                                       const std::vector<PlannedAction>& actions,
                                       const SchedulerOptions& options) {
  std::map<TrialKey, Planned> planned;
  for (const PlannedAction& action : actions) {
    Planned& p = planned[{action.experiment, action.run.trial}];
    if (action.trial_id) p.id = action.trial_id;
    if (action.shared_with) {
      p.shared_with = action.shared_with;
      ++p.shared;
    }
  }
  const auto name_of = [&](std::size_t file) { return sweep[file]->first().name; };
  const auto reference = [&](const TrialKey& key) {
    return name_of(key.first) + "'s " +
           trial_reference(sweep[key.first]->trials[key.second], planned[key].id);
  };
  const std::optional<store::Store> store =
      options.policy == ResumePolicy::force
          ? std::nullopt
          : store::Store::open_read_only_if_recorded(options.db);
  std::vector<std::string> lines;
  for (std::size_t file = 0; file < sweep.size(); ++file)
    for (std::size_t trial = 0; trial < sweep[file]->trials.size(); ++trial) {
      const TrialKey key{file, trial};
      const auto it = planned.find(key);
      if (it == planned.end()) continue;  // another shard's
      if (it->second.shared_with) {
        lines.push_back(reference(key) + " is " + reference(*it->second.shared_with) + ": " +
                        runs(it->second.shared, ""));
        continue;
      }
      if (!store) continue;
      // Recorded under another experiment's name: those runs are this trial's
      // too (an experiment row of this name is the same file edited).
      std::vector<std::string> others;
      std::int64_t recorded = 0;
      for (const store::IdentityTrial& t : store->trials_of_identity(sweep[file]->identities[trial]))
        if (t.runs > 0 && t.experiment != name_of(file)) {
          others.push_back(t.experiment + "'s trial:" + std::to_string(t.id));
          recorded += t.runs;
        }
      if (!others.empty())
        lines.push_back(reference(key) + " is " + join(others, " and ") + ": " +
                        runs(recorded, "recorded "));
    }
  return lines;
}

}  // namespace runner::cli
