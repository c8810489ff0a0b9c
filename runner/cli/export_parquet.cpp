// Parquet through pyarrow (see export_parquet.hpp).
#include "export_parquet.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/process/fd.hpp"
#include "runner/common/files.hpp"
#include "runner/common/json.hpp"

#ifndef RUNNER_DEFAULT_PYTHON
#define RUNNER_DEFAULT_PYTHON ""
#endif

extern char** environ;

namespace runner::cli {
namespace {

// python -c SCRIPT ROWS.jsonl OUT.parquet COLUMNS-JSON. Exit 3: no pyarrow.
// The types are explicit, so a column keeps its type even when every value
// in it is null, and the reader never guesses.
constexpr const char* kConverter = R"(import json, os, sys
try:
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq
except ImportError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
rows, target, columns = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_()}
schema = pa.schema([pa.field(name, types[kind]) for name, kind in columns])
if os.path.getsize(rows) == 0:
    table = schema.empty_table()
else:
    table = pj.read_json(rows, read_options=pj.ReadOptions(block_size=1 << 26),
                         parse_options=pj.ParseOptions(explicit_schema=schema,
                                                       unexpected_field_behavior="error"))
    table = table.select(schema.names)
pq.write_table(table, target)
)";

struct Finished {
  int code = -1;        ///< exit code; -1 when killed by a signal
  std::string output;   ///< stdout and stderr together
};

// Runs `argv` (PATH searched) with both output streams captured.
Finished run_captured(const std::vector<std::string>& argv, const std::string& python) {
  Pipe pipe = make_pipe();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe.write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe.write.get(), STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  pipe.write.reset();  // the child holds its own copy: end of file when it exits
  if (spawned != 0)
    throw Error("--format parquet: cannot run the Python '" + python + "': " +
                    std::strerror(spawned),
                "parquet is written by pyarrow: set RUNNER_PYTHON to a Python that has it "
                "(python3 -m pip install pyarrow)");
  Finished finished;
  finished.output = read_all(pipe.read.get());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) finished.code = WEXITSTATUS(status);
  return finished;
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  const auto newline = text.rfind('\n');
  return newline == std::string::npos ? text : text.substr(newline + 1);
}

}  // namespace

std::string export_python() {
  if (const char* env = std::getenv("RUNNER_PYTHON"); env != nullptr && *env != '\0') return env;
  // The build's venv may be gone (an installed binary on another machine).
  const std::string configured = RUNNER_DEFAULT_PYTHON;
  return !configured.empty() && ::access(configured.c_str(), X_OK) == 0 ? configured : "python3";
}

std::size_t write_parquet(const ExportTable& table, const std::filesystem::path& destination) {
  const std::string python = export_python();
  std::string columns = "[";
  for (const auto& column : table.columns())
    columns += (columns.size() > 1 ? "," : "") + std::string("[") + json_quote(column.name) + "," +
               json_quote(to_string(column.type)) + "]";
  columns += "]";

  TemporaryFile rows_file(destination);
  std::size_t rows = 0;
  {
    std::ofstream out(rows_file.path(), std::ios::binary | std::ios::trunc);
    rows = write_json_lines(table, out);
    out.close();
    if (!out)
      throw Error("cannot write " + destination.string() + ": " + std::strerror(errno),
                  "choose a file in a directory that exists and that you can write");
  }
  TemporaryFile parquet_file(destination);
  const Finished done = run_captured(
      {python, "-c", kConverter, rows_file.path().string(), parquet_file.path().string(), columns},
      python);
  if (done.code == 3)
    throw Error("--format parquet needs pyarrow, which " + python + " cannot import (" +
                    last_line(done.output) + ")",
                "install it into that Python ('" + python +
                    " -m pip install pyarrow'), or set RUNNER_PYTHON to a Python that has it");
  if (done.code != 0)
    throw Error("cannot write " + destination.string() + ": " + python +
                    " failed to convert the table to parquet" +
                    (done.output.empty() ? std::string() : ": " + last_line(done.output)),
                {}, ErrorKind::run);
  parquet_file.commit();
  return rows;
}

}  // namespace runner::cli
