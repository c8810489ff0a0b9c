// The scripts of `runner submit slurm`. A shard's task records its exit
// status in a file of its own when runner returns; a task that SLURM
// cancelled, timed out or lost with its node leaves none. The merge job
// reads those files rather than SLURM's accounting, which many clusters (and
// the test cluster) do not keep, and which forgets finished array tasks.
#include "submit_slurm.hpp"

#include <string>

#include "runner/common/error.hpp"
#include "runner/version.hpp"

namespace runner::cli {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

fs::path shards_folder(const fs::path& out) {
  fs::path folder = out;
  folder.replace_extension(".shards");
  return folder;
}

fs::path shard_database(const fs::path& folder, std::int64_t k) {
  return folder / ("shard-" + std::to_string(k) + ".db");
}

namespace {

// An #SBATCH line's value: sbatch reads double quotes there, not a shell's
// single ones (submit refuses paths with a double quote or a newline).
std::string directive(const std::string& option, const std::string& value) {
  return "#SBATCH " + option + "=\"" + value + "\"\n";
}

std::string header(const SlurmSweep& s, const std::string& what) {
  std::string files;
  for (const fs::path& f : s.files) files += " " + f.string();
  return "#!/bin/bash\n"
         "# Written by `runner submit slurm` (runner " RUNNER_VERSION_STRING "): " + what + "\n"
         "# Experiment file(s):" + files + "\n";
}

// The `runner run` of shard "$shard" of the array, without a newline.
std::string run_command(const SlurmSweep& s) {
  std::string cmd = shell_quote(s.runner.string()) + " run";
  for (const fs::path& f : s.files) cmd += " " + shell_quote(f.string());
  cmd += " --shard \"$shard/" + std::to_string(s.shards) + "\"";
  cmd += " --db " + shell_quote((s.folder / "shard-").string()) + "\"$shard\".db";
  for (const fs::path& p : s.plugin_paths) cmd += " --plugin-path " + shell_quote(p.string());
  for (const std::string& kv : s.set) cmd += " --set " + shell_quote(kv);
  return cmd;
}

}  // namespace

std::string array_script(const SlurmSweep& s) {
  const std::string n = std::to_string(s.shards);
  const std::string folder = shell_quote(s.folder.string());
  std::string out = header(s, "one array task per shard; task K runs `runner run --shard K/" +
                                  n + "` into shard-K.db.");
  out += "# Resubmitting the same command runs only what a shard's database lacks.\n";
  out += directive("--job-name", s.job_name);
  out += "#SBATCH --array=1-" + n + "\n";
  out += "#SBATCH --ntasks=" + std::to_string(s.world_size) + "\n";
  out += directive("--output", (s.folder / "shard-%a.out").string());
  out += "\nset -uo pipefail\n";
  out += "shard=$SLURM_ARRAY_TASK_ID\n";
  out += "status=" + folder + "/shard-$shard.status\n";
  out += "# No status file until runner returns: the merge job reads a missing one as a\n"
         "# task that was cancelled, ran out of time or lost its node.\n";
  out += "rm -f \"$status\"\n";
  if (s.world_size > 1) {
    // examples/slurm/runner.sbatch's contract: one task per rank, the
    // torchrun variables from SLURM's; rank 0 records into the shard's database.
    out += "# " + std::to_string(s.world_size) +
           " ranks (the experiment's distributed.world_size): one task per rank, rank 0\n"
           "# (the first task) serves the rendezvous and records; the others follow it.\n";
    out += "master=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
    out += "port=$((20000 + SLURM_JOB_ID % 20000))\n";
    out += "srun --kill-on-bad-exit=1 --export=ALL,MASTER_ADDR=\"$master\",MASTER_PORT=\"$port\" \\\n"
           "  bash -c 'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
           "LOCAL_RANK=$SLURM_LOCALID; exec \"$@\"' rank \\\n  ";
  }
  out += run_command(s) + "\n";
  out += "code=$?\n";
  out += "echo \"$code\" > \"$status.tmp\" && mv -f \"$status.tmp\" \"$status\"\n";
  out += "exit \"$code\"\n";
  return out;
}

std::string merge_script(const SlurmSweep& s) {
  const std::string n = std::to_string(s.shards);
  std::string out = header(s, "after the array ends (afterany), merges the shard\n"
                              "# databases into one and names the shards that did not finish.");
  out += directive("--job-name", s.job_name + "-merge");
  out += "#SBATCH --ntasks=1\n";
  out += directive("--output", (s.folder / "merge.out").string());
  out += "\nset -uo pipefail\n";
  out += "folder=" + shell_quote(s.folder.string()) + "\n";
  out += "into=" + shell_quote(s.out.string()) + "\n";
  out += "n=" + n + "\n";
  out += "resubmit=" + shell_quote(s.resubmit) + "\n";
  out += "failed=()\n"
         "databases=()\n"
         "for ((k = 1; k <= n; k++)); do\n"
         "  [ -f \"$folder/shard-$k.db\" ] && databases+=(\"$folder/shard-$k.db\")\n"
         "  if [ ! -f \"$folder/shard-$k.status\" ]; then\n"
         "    failed+=(\"$k\")\n"
         "    echo \"shard $k/$n did not finish: no exit status (cancelled, out of time or its "
         "node was lost); log: $folder/shard-$k.out\"\n"
         "  elif [ \"$(cat \"$folder/shard-$k.status\")\" != 0 ]; then\n"
         "    failed+=(\"$k\")\n"
         "    echo \"shard $k/$n failed: runner run exited with status "
         "$(cat \"$folder/shard-$k.status\") (1: a run failed, 2: bad input, 130: interrupted); "
         "log: $folder/shard-$k.out\"\n"
         "  fi\n"
         "done\n";
  out += "merged=0\n";
  out += "if [ \"${#databases[@]}\" -gt 0 ]; then\n"
         "  " + shell_quote(s.runner.string()) + " merge \"${databases[@]}\" --into \"$into\" || merged=$?\n"
         "fi\n";
  out += "if [ \"$merged\" != 0 ]; then\n"
         "  echo \"runner merge exited with status $merged: $into is as it was before this job\"\n"
         "  exit 1\n"
         "fi\n";
  out += "if [ \"${#failed[@]}\" -gt 0 ]; then\n"
         "  echo \"failed shards: ${failed[*]} (${#failed[@]} of $n); what they finished is "
         "merged into $into\"\n"
         "  echo \"resubmit to run only what they lack: $resubmit\"\n"
         "  exit 1\n"
         "fi\n";
  out += "echo \"all $n shards finished; merged into $into\"\n";
  return out;
}

std::vector<std::string> sbatch_words(const std::string& args) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (const char c : args) {
    if (quote != 0) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0)
    throw Error("--sbatch has an unclosed " + std::string(1, quote) + " quote: " + args,
                "close the quote, e.g. --sbatch \"--partition=gpu --time=01:00:00\"");
  if (in_word) words.push_back(word);
  // What runner itself sets: the array, the dependency, the output files.
  for (const std::string& w : words)
    for (const char* own : {"--array", "--dependency", "--parsable", "--output", "--error",
                            "-a", "-d", "-o", "-e"}) {
      const std::string o = own;
      if (w == o || w.rfind(o + "=", 0) == 0)
        throw Error("--sbatch may not set " + o + ": runner submit sets it itself",
                    "leave " + o + " out; the scripts and logs are in the shards folder");
    }
  return words;
}

}  // namespace runner::cli
