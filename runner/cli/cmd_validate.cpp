// runner validate FILE: check an experiment file and every trial it expands
// to, as `run` does before anything runs, without running or recording anything.
#include <iostream>

#include "commands.hpp"
#include "running.hpp"
#include "runner/common/error.hpp"
#include "table.hpp"
#include "trial_names.hpp"

namespace runner::cli {
namespace {

int handle_validate(const Args& args, const Global& global) {
  std::vector<std::string> set;
  if (auto it = args.values.find("--set"); it != args.values.end()) set = it->second;
  const PreparedExperiment p = prepare(args.positionals[0], global, set);
  const Experiment& e = p.first();
  std::cout << e.source->path.string() << ": ok\n"
            << "experiment '" << e.name << "' (" << e.kind << "): " << p.trials.size()
            << " trial(s) x " << e.repeats << " repetition(s)\n";
  if (args.has("--list-trials")) {
    // The store's id of each trial already recorded: what compare and report take.
    const auto ids = recorded_trial_ids(p, global.db);
    bool any_new = false;
    Table table({"#", "trial", "label", "model", "loader", "optimizer", "device", "config"});
    for (const Trial& t : p.trials) {
      const auto& id = ids[static_cast<std::size_t>(t.index)];
      any_new = any_new || !id;
      const Experiment& x = t.experiment;
      // A kernel experiment's "model" is its kernel plugin.
      const std::string& timed = x.kernel ? x.kernel->plugin : x.model.plugin;
      table.add({std::to_string(t.index + 1), id ? std::to_string(*id) : "new",
                 t.label.empty() ? "-" : t.label, timed,
                 x.data ? x.data->plugin : "-", x.optimizer ? x.optimizer->plugin : "-",
                 p.devices.at(x.device.type), x.config_hash().substr(0, 12)});
    }
    table.print(std::cout);
    std::cout << "#: the trial's position in the file; " << trial_column_note()
              << (any_new ? "; new: not recorded in " + global.db.string() + " yet" : "") << "\n";
  }
  return kExitOk;
}

}  // namespace

Command validate_command() {
  CommandDef def;
  def.name = "validate";
  def.summary = "check an experiment file and its trials without running anything";
  def.usage = "runner validate FILE [options]";
  def.positionals = {"FILE"};
  def.options = {
      {"--set", "KEY=VALUE", "override a dotted key of the file", true},
      {"--list-trials", "", "print the expanded list of trials", false},
  };
  def.details =
      "Checks syntax, sections, keys, types, ranges, extends, sweeps, plugin names and\n"
      "plugin options of every trial.";
  return {def, &handle_validate};
}

}  // namespace runner::cli
