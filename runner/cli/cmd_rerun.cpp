// runner rerun RUN_ID: a recorded run's stored configuration run once more,
// as a new run (the scheduler's rerun file rebuilds it from the store).
#include <spdlog/spdlog.h>

#include <optional>

#include "commands.hpp"
#include "running.hpp"
#include "runner/common/error.hpp"
#include "runner/scheduler/rerun.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

int handle_rerun(const Args& args, const Global& global) {
  const std::int64_t id = parse_integer(args.positionals[0], "RUN_ID", 1);
  std::optional<store::RunDetail> run;
  {
    const store::Store db = store::Store::open_read_only(global.db);
    run = db.get_run(id);
  }
  if (!run)
    throw Error("run " + std::to_string(id) + " is not in " + global.db.string(),
                "run 'runner runs' to list the recorded runs");
  const RerunFile file(*run);
  for (const auto& warning : file.warnings()) spdlog::warn("{}", warning);
  RunFlags flags = run_flags(args, global);
  flags.options.policy = ResumePolicy::force;
  // Recorded under the run's own experiment row: an unchanged configuration
  // adds a run to the run's trial, not a new experiment and trial.
  flags.options.experiment_id = run->experiment_id;
  flags.set.push_back("experiment.repeats=1");
  const PreparedExperiment p = prepare(file.path(), global, flags.set);
  // The same configuration must come back, or the rerun would not be one.
  if (p.trials.size() != 1 || p.first().config_hash() != run->config_hash)
    spdlog::warn("the configuration of run {} no longer resolves to the same hash ({} now, "
                 "{} then): a plugin's declared options changed",
                 id, p.first().config_hash().substr(0, 12), run->config_hash.substr(0, 12));
  return run_printing(Sweep{&p}, flags.options, global);
}

}  // namespace

Command rerun_command() {
  CommandDef def;
  def.name = "rerun";
  def.summary = "run a recorded run's exact configuration again, as a new run";
  def.usage = "runner rerun RUN_ID [options]";
  def.positionals = {"RUN_ID"};
  def.options = {
      {"--isolate", "MODE", "process (default) or none", false},
  };
  def.details =
      "Rebuilds the run's stored resolved configuration (canonical JSON) and runs it once,\n"
      "loading the same plugin library files, and records it under the run's experiment:\n"
      "an unchanged configuration adds a run to the run's trial. A plugin whose file hash\n"
      "changed since is named in a warning; the rerun then belongs to a new trial of that\n"
      "experiment (a trial's identity includes the plugin hashes and the environment).";
  return {def, &handle_rerun};
}

}  // namespace runner::cli
