// runner merge DB... --into OUT: joins shard databases (`runner run --shard
// K/N` writes one per shard) into one, without duplicating experiments,
// trials, fingerprints or runs. The work is Store::merge_from; this file
// checks the inputs first, so that bad input writes nothing, and reports.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "commands.hpp"
#include "table.hpp"
#include "runner/common/error.hpp"
#include "runner/common/output_path.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage = "runner merge DB... --into OUT [options]";

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

bool path_exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

/// Removes an output this command created, with SQLite's WAL companions, so
/// that a merge that failed half-way (a conflict found in the third input)
/// leaves no empty database behind.
void remove_created(const fs::path& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    fs::remove(fs::path(path.string() + suffix), ec);
}

int handle_merge(const Args& args, const Global& /*global*/) {
  if (!args.has("--into"))
    throw Error("runner merge: missing --into OUT", std::string("usage: ") + kUsage);
  const fs::path into = args.get("--into");
  const std::vector<fs::path> inputs(args.positionals.begin(), args.positionals.end());
  // A store is a regular file: SQLite would follow a symbolic link and write
  // its target, or wait on a FIFO (output_path.hpp). Before any input is read.
  OutputUse use;
  use.option = "--into";
  use.example = "all.db";
  use.what = "a database";
  use.standard_output = false;
  use.probe_folder = false;  // Store::check_writable below, with the store's own message
  (void)check_output(into, use);

  // Everything about the inputs is checked before the output is touched.
  // Each is opened read-only once here (a missing, foreign or too new file
  // is refused) and again by the merge.
  for (const fs::path& input : inputs) {
    if (!path_exists(input))
      throw Error("database " + quoted(input) + " does not exist",
                  "check the paths of the databases to merge");
    std::error_code ec;
    if (path_exists(into) && fs::equivalent(input, into, ec))
      throw Error("cannot merge database " + quoted(input) + " into itself",
                  "name another output file with --into");
    static_cast<void>(store::Store::open_read_only(input));
  }
  store::Store::check_writable(into);

  const bool created = !path_exists(into);
  std::vector<store::MergeCounts> counts;
  try {
    store::Store out = store::Store::open(into);
    counts = out.merge_from(inputs);
  } catch (...) {
    if (created) remove_created(into);
    throw;
  }

  store::MergeCounts total;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& c = counts[i];
    total += c;
    std::cout << inputs[i].string() << ": " << c.runs.added << " run(s) added, "
              << c.runs.present << " already present";
    if (c.runs_running > 0) std::cout << ", " << c.runs_running << " still running (not merged)";
    std::cout << "\n";
  }
  std::cout << "\n";
  Table table({"table", "added", "already present"});
  const std::pair<const char*, const store::TableCounts*> rows[] = {
      {"experiments", &total.experiments}, {"trials", &total.trials},
      {"fingerprints", &total.fingerprints}, {"runs", &total.runs},
      {"run_plugins", &total.run_plugins},   {"samples", &total.samples},
      {"summaries", &total.summaries},       {"metrics", &total.metrics},
      {"evaluations", &total.evaluations},   {"run_files", &total.run_files},
      {"run_attributes", &total.run_attributes}, {"run_ops", &total.run_ops},
      {"run_labels", &total.run_labels}};
  for (const auto& [name, c] : rows)
    table.add({name, std::to_string(c->added), std::to_string(c->present)});
  table.print(std::cout);
  std::cout << "merged " << inputs.size() << " database(s) into " << into.string() << "\n";
  if (total.runs_running > 0) {
    spdlog::warn(
        "{} run(s) are still running in their input and were not merged; merge again once "
        "they have finished",
        total.runs_running);
  }
  return kExitOk;
}

}  // namespace

Command merge_command() {
  CommandDef def;
  def.name = "merge";
  def.summary = "join runner databases (e.g. one per --shard) into one";
  def.usage = kUsage;
  def.positionals = {"DB"};
  def.variadic = true;
  def.options = {{"--into", "OUT",
                  "the database to merge into (created if absent): a new path or a regular file",
                  false}};
  def.details =
      "Copies every experiment, trial, fingerprint and run of each DB into OUT.\n"
      "Experiments (name + source text), trials (experiment + identity) and\n"
      "fingerprints (hash) already in OUT are not duplicated; a run already in OUT\n"
      "(same uuid) is skipped, so merging the same DB twice adds nothing. The\n"
      "inputs are opened read-only and never changed. All inputs are merged in one\n"
      "transaction: on any error OUT is left as it was. --db is not used.";
  return {def, &handle_merge};
}

}  // namespace runner::cli
