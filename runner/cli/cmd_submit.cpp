// runner submit slurm FILE... --shards N: a sweep as a SLURM job array (one
// task per shard, each `runner run --shard K/N` into its own database) and a
// merge job after it. Everything is checked before anything is written or
// submitted; the scripts are in submit_slurm.cpp.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "commands.hpp"
#include "running.hpp"
#include "submit_slurm.hpp"
#include "runner/common/error.hpp"
#include "runner/common/files.hpp"
#include "runner/common/strings.hpp"
#include "runner/scheduler/plan.hpp"

namespace runner::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "runner submit slurm FILE... --shards N [--sbatch \"ARGS\"] [--db OUT.db] [options]";

// sbatch as found on PATH, or an error naming the PATH searched.
fs::path find_sbatch() {
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "";
  for (const std::string& dir : split(dirs, ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "sbatch";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw Error("sbatch not found on PATH: " + dirs,
              "run on a machine with SLURM's client commands (a login node), or print the "
              "scripts with --dry-run");
}

// Runs `argv` and returns its exit status and what it printed (stdout and stderr).
std::pair<int, std::string> capture(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(std::string("cannot run sbatch: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot run sbatch: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = ::read(fds[0], buffer, sizeof buffer)) != 0;) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

// Submits `script`; returns the job id `sbatch --parsable` printed ("id" or "id;cluster").
std::string submit(const fs::path& sbatch, std::vector<std::string> options,
                   const fs::path& script) {
  std::vector<std::string> argv{sbatch.string(), "--parsable"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(script.string());
  const auto [code, text] = capture(argv);
  const std::string id = trim(text.substr(0, text.find(';')));
  const bool numeric = !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
  if (code != 0 || !numeric)
    throw Error("sbatch " + script.string() + " failed (exit status " + std::to_string(code) +
                    "): " + trim(text),
                "check the --sbatch options and the cluster's limits (partition, time)",
                ErrorKind::run);
  return id;
}

fs::path absolute_path(const fs::path& path) { return fs::absolute(path).lexically_normal(); }

// A path written into an #SBATCH line: sbatch reads it between double quotes.
void check_path(const fs::path& path, const std::string& what) {
  if (path.string().find_first_of("\"\n") != std::string::npos)
    throw Error(what + " " + path.string() + " contains a double quote or a newline",
                "#SBATCH lines cannot hold it: use another path");
}

// The SLURM job name: the first experiment's name, in characters every shell and squeue show.
std::string job_name(const std::string& experiment) {
  std::string out = "runner-";
  for (const char c : experiment)
    out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_') ? c : '_';
  return out;
}

// The ranks every array task needs: the world size of the [distributed]
// trials, which must agree (a launched job has one WORLD_SIZE).
std::int64_t world_size(const std::vector<PreparedExperiment>& prepared) {
  std::int64_t size = 1;
  std::string first;
  for (const PreparedExperiment& p : prepared)
    for (const Trial& t : p.trials) {
      const Experiment& e = t.experiment;
      if (e.kind != RunKind::train || !e.distributed.enabled || e.distributed.world_size <= 1)
        continue;
      if (size > 1 && e.distributed.world_size != size)
        throw Error(e.where_of("distributed.world_size"),
                    "world_size " + std::to_string(e.distributed.world_size) +
                        " differs from the " + std::to_string(size) + " of " + first +
                        ": every task of a job array has one number of ranks",
                    "submit trials of different world sizes separately");
      size = e.distributed.world_size;
      first = p.file.string();
    }
  return size;
}

// The command that submits the same sweep again, every path absolute.
std::string resubmit_command(const SlurmSweep& s, const std::string& sbatch_args) {
  std::string cmd = shell_quote(s.runner.string()) + " submit slurm";
  for (const fs::path& f : s.files) cmd += " " + shell_quote(f.string());
  cmd += " --shards " + std::to_string(s.shards);
  if (!sbatch_args.empty()) cmd += " --sbatch " + shell_quote(sbatch_args);
  cmd += " --db " + shell_quote(s.out.string());
  for (const fs::path& p : s.plugin_paths) cmd += " --plugin-path " + shell_quote(p.string());
  for (const std::string& kv : s.set) cmd += " --set " + shell_quote(kv);
  return cmd;
}

std::string sbatch_line(const std::vector<std::string>& options, const std::string& extra,
                        const fs::path& script) {
  std::string line = "sbatch --parsable";
  for (const std::string& o : options) line += " " + shell_quote(o);
  return line + extra + " " + shell_quote(script.string());
}

// A folder submitted with another --shards holds other slices of the runs:
// merging them would duplicate runs.
void check_folder(const fs::path& folder, std::int64_t shards) {
  const fs::path marker = folder / "shards";
  std::error_code ec;
  if (!fs::exists(marker, ec)) return;
  std::ifstream in(marker);
  std::stringstream text;
  text << in.rdbuf();
  const std::string recorded = trim(text.str());
  if (recorded != std::to_string(shards))
    throw Error(folder.string() + " holds the shards of a --shards " + recorded +
                    " submission, not " + std::to_string(shards),
                "resubmit with --shards " + recorded + ", or give another --db");
}

int handle_submit_slurm(const Args& args, const Global& global) {
  if (!args.has("--shards"))
    throw Error("runner submit slurm: missing --shards N", std::string("usage: ") + kUsage);
  SlurmSweep s;
  s.shards = parse_integer(args.get("--shards"), "--shards", 1);
  const std::string sbatch_args = args.get("--sbatch");
  const std::vector<std::string> options = sbatch_words(sbatch_args);
  const bool dry_run = args.has("--dry-run");
  const std::optional<fs::path> sbatch =
      dry_run ? std::nullopt : std::optional<fs::path>(find_sbatch());

  s.runner = absolute_path(fs::read_symlink("/proc/self/exe"));
  s.out = absolute_path(global.db);
  s.folder = shards_folder(s.out);
  for (const std::string& f : args.positionals) s.files.push_back(absolute_path(f));
  for (const fs::path& p : global.plugin_paths) s.plugin_paths.push_back(absolute_path(p));
  if (auto it = args.values.find("--set"); it != args.values.end()) s.set = it->second;
  check_path(s.folder, "the shards folder");

  // Every file is prepared as `runner run` would: a bad file is refused here,
  // not in every array task.
  std::vector<PreparedExperiment> prepared;
  for (const fs::path& f : s.files) prepared.push_back(prepare(f, global, s.set));
  s.world_size = world_size(prepared);
  s.job_name = job_name(prepared.front().first().name);
  s.resubmit = resubmit_command(s, sbatch_args);

  std::vector<std::int64_t> per_shard(static_cast<std::size_t>(s.shards), 0);
  std::int64_t runs = 0;
  for (const PreparedExperiment& p : prepared)
    for (std::size_t t = 0; t < p.trials.size(); ++t)
      for (std::int64_t r = 0; r < p.trials[t].experiment.repeats; ++r) {  // as interleave(): from 0
        ++runs;
        for (std::int64_t k = 1; k <= s.shards; ++k)
          if (in_shard(p.identities[t], r, Shard{k, s.shards})) ++per_shard[k - 1];
      }
  std::vector<std::string> empty;
  for (std::int64_t k = 1; k <= s.shards; ++k)
    if (per_shard[k - 1] == 0) empty.push_back(std::to_string(k));

  const std::string array = array_script(s);
  const std::string merge = merge_script(s);
  const fs::path array_path = s.folder / "array.sbatch";
  const fs::path merge_path = s.folder / "merge.sbatch";
  std::cout << runs << " run(s) in " << s.shards << " shard(s) of";
  for (std::int64_t k = 1; k <= s.shards; ++k)
    std::cout << (k > 1 ? "," : "") << " " << per_shard[k - 1];
  std::cout << " run(s)";
  if (s.world_size > 1) std::cout << "; " << s.world_size << " ranks per task";
  std::cout << "\n";
  if (!empty.empty())
    std::cout << "shard(s) " << join(empty, ", ") << " have no run (the runs are dealt by a "
              << "hash): fewer shards would do\n";
  if (dry_run) {
    std::cout << "\n# " << array_path.string() << "\n" << array << "\n# " << merge_path.string()
              << "\n" << merge << "\n# submitted as:\n"
              << sbatch_line(options, "", array_path) << "\n"
              << sbatch_line(options, " --dependency=afterany:ARRAY_JOB_ID", merge_path) << "\n"
              << "nothing was written or submitted (--dry-run)\n";
    return kExitOk;
  }

  check_folder(s.folder, s.shards);
  std::error_code ec;
  fs::create_directories(s.folder, ec);
  if (ec)
    throw Error("cannot create the shards folder " + s.folder.string() + ": " + ec.message(),
                "give a --db in a folder you can write");
  write_file_atomically(s.folder / "shards", std::to_string(s.shards) + "\n");
  write_file_atomically(array_path, array);
  write_file_atomically(merge_path, merge);

  const std::string array_id = submit(*sbatch, options, array_path);
  std::vector<std::string> merge_options = options;
  merge_options.push_back("--dependency=afterany:" + array_id);
  std::string merge_id;
  try {
    merge_id = submit(*sbatch, merge_options, merge_path);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; the array job " + array_id +
                    " is submitted without its merge job",
                "cancel it (scancel " + array_id + ") and submit again, or merge its shards "
                "yourself when it ends (runner merge " + s.folder.string() +
                "/shard-*.db --into " + s.out.string() + ")",
                ErrorKind::run);
  }
  std::cout << "submitted array job " << array_id << " (" << s.shards
            << " tasks, one per shard) and merge job " << merge_id << " (after the array)\n"
            << "scripts, shard databases and logs: " << s.folder.string() << "\n"
            << "follow:  squeue -j " << array_id << "," << merge_id << "   (afterwards: sacct -j "
            << array_id << "," << merge_id << " where accounting is on)\n"
            << "report:  " << (s.folder / "merge.out").string()
            << " names the shards that failed\n"
            << "merged:  " << s.out.string() << "\n";
  return kExitOk;
}

// `runner submit` without a scheduler, or with one runner does not know.
int handle_submit(const Args& args, const Global& /*global*/) {
  throw Error("unknown scheduler '" + args.positionals.front() + "'; runner submits to 'slurm'",
              std::string("usage: ") + kUsage);
}

}  // namespace

Command submit_slurm_command() {
  CommandDef def;
  def.name = "submit slurm";
  def.summary = "submit a sweep to SLURM: a job array of shards and a merge job after it";
  def.usage = kUsage;
  def.positionals = {"FILE"};
  def.variadic = true;
  def.options = {
      {"--shards", "N", "array tasks: task K runs 'runner run --shard K/N' (required)", false},
      {"--sbatch", "ARGS", "more sbatch options for both jobs, e.g. \"--partition=gpu --time=1:00:00\"",
       false},
      {"--set", "KEY=VALUE", "override a dotted key of the files in every task", true},
      {"--dry-run", "", "print the scripts and the sbatch commands; write and submit nothing",
       false},
  };
  def.details =
      "The merged database is --db (default ./runner.db); beside it, OUT.shards/ holds the\n"
      "scripts (array.sbatch, merge.sbatch), one database, log and exit-status file per\n"
      "shard, and merge.out. Each task resumes from its shard's database, so submitting the\n"
      "same command again after a cancelled task or a lost node runs only what is missing.\n"
      "The merge job runs after every task has ended (afterany), merges what the shards\n"
      "recorded into --db, names each shard that did not finish, and exits 1 if there is one.\n"
      "An experiment with distributed.world_size = W > 1 gets W tasks per shard (srun, the\n"
      "torchrun environment; see examples/slurm/runner.sbatch).";
  return {def, &handle_submit_slurm};
}

Command submit_command() {
  CommandDef def;
  def.name = "submit";
  def.summary = "submit a sweep to a cluster's scheduler (see 'runner submit slurm --help')";
  def.usage = "runner submit SCHEDULER FILE... [options]";
  def.positionals = {"SCHEDULER"};
  def.variadic = true;
  return {def, &handle_submit};
}

}  // namespace runner::cli
