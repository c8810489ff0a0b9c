// The scripts `runner submit slurm` writes: a job array of one task per
// shard (each `runner run --shard K/N` into its own database) and a merge job
// that runs after the array and names the shards that failed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace runner::cli {

/// Everything the two scripts depend on; every path absolute.
struct SlurmSweep {
  std::filesystem::path runner;                    ///< the runner executable
  std::vector<std::filesystem::path> files;        ///< the experiment files
  std::vector<std::string> set;                    ///< --set KEY=VALUE, passed on to runner run
  std::vector<std::filesystem::path> plugin_paths; ///< --plugin-path, passed on
  std::filesystem::path out;                       ///< the merged database
  std::filesystem::path folder;                    ///< scripts, shard databases, logs
  std::int64_t shards = 1;                         ///< array tasks
  std::int64_t world_size = 1;                     ///< ranks per task (srun) when > 1
  std::string job_name;                            ///< SLURM job name of the array
  std::string resubmit;                            ///< the command that submits this again
};

/// `text` quoted for a POSIX shell (single quotes).
[[nodiscard]] std::string shell_quote(const std::string& text);

/// The shards folder of the merged database `out`: "sweep.db" -> "sweep.shards".
[[nodiscard]] std::filesystem::path shards_folder(const std::filesystem::path& out);

/// Shard K's database, log and exit-status file in `folder`.
[[nodiscard]] std::filesystem::path shard_database(const std::filesystem::path& folder,
                                                   std::int64_t k);

/// The job-array script: task K runs `runner run --shard K/N` into shard K's database.
[[nodiscard]] std::string array_script(const SlurmSweep& sweep);

/// The merge job's script: merges the shard databases there are into `out`,
/// names every shard without a zero exit status, exits 1 if there is one.
[[nodiscard]] std::string merge_script(const SlurmSweep& sweep);

/// The words of --sbatch "ARGS" (whitespace-separated; '...' and "..." group).
/// Throws runner::Error (input) for an unclosed quote or an option runner sets itself.
[[nodiscard]] std::vector<std::string> sbatch_words(const std::string& args);

}  // namespace runner::cli
