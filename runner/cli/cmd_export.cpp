// runner export SELECTOR... [--what W] [--format F] [--out FILE]: the
// selected runs as one tidy table (docs/export.md) for pandas and friends.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "export_parquet.hpp"
#include "export_table.hpp"
#include "selection.hpp"
#include "runner/common/error.hpp"
#include "runner/common/files.hpp"
#include "runner/common/output_path.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {
namespace {

enum class Format { csv, json, parquet };

std::size_t write_text(const ExportTable& table, Format format, std::ostream& out) {
  return format == Format::csv ? write_csv(table, out) : write_json(table, out);
}

int handle_export(const Args& args, const Global& global) {
  const std::string format_text = args.get("--format", "csv");
  Format format;
  if (format_text == "csv") format = Format::csv;
  else if (format_text == "json") format = Format::json;
  else if (format_text == "parquet") format = Format::parquet;
  else throw Error("--format must be csv, json or parquet, found '" + format_text + "'");
  const std::string what_text = args.get("--what", "runs");
  const std::optional<ExportWhat> what = parse_export_what(what_text);
  if (!what)
    throw Error("--what must be runs, samples, summaries or metrics, found '" + what_text + "'");
  const std::filesystem::path out = args.get("--out");
  if (format == Format::parquet && !args.has("--out"))
    throw Error("--format parquet needs --out FILE",
                "parquet is a binary file, not for a terminal: e.g. --out runs.parquet");
  // Before anything is read: a path that cannot be written, or that is not
  // runner's to replace, fails at once (output_path.hpp).
  OutputUse use;
  use.option = "--out";
  use.example = "out." + format_text;
  use.what = "parquet";
  use.standard_output = format != Format::parquet;
  const bool to_file = args.has("--out") && check_output(out, use) == OutputTarget::file;

  const store::Store db = store::Store::open_read_only(global.db);
  Side selected = select_all(db, args.positionals, RunFilter::all);
  const ExportTable table(db, std::move(selected.runs), *what);

  if (!to_file) {
    write_text(table, format, std::cout);
    std::cout.flush();
    if (!std::cout) throw Error("cannot write the table to standard output", {}, ErrorKind::run);
    return kExitOk;
  }
  std::size_t rows = 0;
  if (format == Format::parquet) {
    rows = write_parquet(table, out);
  } else {
    TemporaryFile file(out);
    std::ofstream stream(file.path(), std::ios::binary | std::ios::trunc);
    rows = write_text(table, format, stream);
    stream.close();
    if (!stream)
      throw Error("cannot write " + out.string() + ": " + std::strerror(errno),
                  "choose a file in a directory that exists and that you can write");
    file.commit();
  }
  std::cout << "wrote " << out.string() << " (" << rows << " row(s), " << table.columns().size()
            << " columns)\n";
  return kExitOk;
}

}  // namespace

Command export_command() {
  CommandDef def;
  def.name = "export";
  def.summary = "export runs, samples, summaries or metrics as a tidy table (CSV, JSON, parquet)";
  def.usage = "runner export SELECTOR... [--what runs|samples|summaries|metrics] "
              "[--format csv|json|parquet] [--out FILE]";
  def.positionals = {"SELECTOR"};
  def.variadic = true;
  def.options = {
      {"--what", "WHAT",
       "one row per: runs (default), samples (per step), summaries (per run and metric), "
       "metrics (per run and metric)",
       false},
      {"--format", "FORMAT", "csv (default), json (an array of records) or parquet (needs --out)",
       false},
      {"--out", "FILE",
       "write to FILE, whole or not at all; a new path or a regular file, - for standard "
       "output (the default)",
       false},
  };
  def.details =
      "SELECTORs are RUN_ID, run:ID[,ID...], trial:ID[,ID...], experiment:NAME or\n"
      "label:KEY=VALUE; every selected run is exported, failed and interrupted ones included.\n"
      "Each row starts with the run's columns, then one column per configuration key\n"
      "(optimizer.lr, train.steps; top-level keys as config.seed), then one per run label\n"
      "(label.commit). Load with pandas.read_csv(FILE),\n"
      "pandas.read_json(FILE, precise_float=True) or pandas.read_parquet(FILE); the columns\n"
      "are listed in docs/export.md. Parquet is written by pyarrow in the Python named by\n"
      "RUNNER_PYTHON (default: the build's Python, else python3).";
  return {def, &handle_export};
}

}  // namespace runner::cli
