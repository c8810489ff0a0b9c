// runner runs [SELECTOR...]: the recorded runs (or the selected ones), newest
// first, with each one's headline p50.
#include <algorithm>
#include <iostream>
#include <limits>
#include <string>

#include "commands.hpp"
#include "selection.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

int handle_runs(const Args& args, const Global& global) {
  if (args.has("--all") && args.has("--limit"))
    throw Error("--all and --limit exclude each other",
                "--all lists every run; --limit N the newest N");
  const std::int64_t limit = args.has("--all")
                                 ? std::numeric_limits<std::int64_t>::max()
                                 : parse_integer(args.get("--limit", "50"), "--limit", 1);
  const store::Store db = store::Store::open_read_only(global.db);
  // With selectors (label:commit=abc123, experiment:NAME): their runs, newest first.
  std::vector<store::RunRow> rows;
  std::int64_t total = 0;
  if (!args.positionals.empty()) {
    for (auto& run : select_all(db, args.positionals, RunFilter::all).runs)
      rows.push_back(std::move(run.row));
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
    total = static_cast<std::int64_t>(rows.size());
    if (static_cast<std::int64_t>(rows.size()) > limit) rows.resize(static_cast<std::size_t>(limit));
  } else {
    rows = db.list_runs(limit);
    total = db.count_runs();
  }
  // trial: the id that `compare trial:N` and `report trial:N` take.
  Table table({"run", "experiment", "trial", "repeat", "kind", "status", "started", "p50"});
  std::int64_t shown = 0;
  for (const auto& r : rows) {
    table.add({std::to_string(r.id), r.experiment, std::to_string(r.trial_id),
               std::to_string(r.repeat_index), to_string(r.kind), to_string(r.status),
               r.started_at, r.headline ? format_ns(*r.headline) : "-"});
    ++shown;
  }
  if (table.empty()) {
    std::cout << "no runs in " << global.db.string() << "\n";
    return kExitOk;
  }
  table.print(std::cout);
  // A cut list says so: the runs left out are the oldest.
  if (shown < total)
    std::cout << shown << " of " << total << " runs shown, the newest; --limit N for more, --all "
              << "for every run\n";
  return kExitOk;
}

}  // namespace

Command runs_command() {
  CommandDef def;
  def.name = "runs";
  def.summary = "list recorded runs, newest first";
  def.usage = "runner runs [SELECTOR...] [options]";
  def.variadic = true;
  def.options = {{"--limit", "N", "show at most N runs (default 50)", false},
                 {"--all", "", "show every run", false}};
  def.details =
      "SELECTORs, as for compare (label:commit=abc123, experiment:NAME, trial:ID, ...), list\n"
      "only their runs; without one, every run.";
  return {def, &handle_runs};
}

}  // namespace runner::cli
