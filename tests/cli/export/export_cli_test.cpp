// runner export end to end (docs/export.md): one database with a sweep of two
// trials, a failed run (its error text made awkward: comma, quotes, CR/LF,
// a byte that is not UTF-8), an interrupted run and a kernel run; every table
// in every format is read back by Python (csv module, json, pandas) and must
// hold exactly the numbers the store holds (read here through store::Store);
// parquet keeps its types; bad input exits 2 and leaves nothing behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/common/run_kind.hpp"
#include "runner/store/store.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::Result;
using runner::test::slurp;

constexpr const char* kPython = RUNNER_PYTHON;  // the build's (pyarrow, pandas), or empty
constexpr const char* kReadBack = RUNNER_SOURCE_DIR "/tests/cli/export/read_back.py";
constexpr const char* kAll = "experiment:sweep experiment:failing experiment:stopped experiment:kernel";
// The failed run's error after the fixture rewrites it; the 0xFF byte is
// exported as U+FFFD.
constexpr const char* kAwkwardError = "failed, \"badly\"\r\nsecond line \xE2\x9C\x93 \xFF end";
constexpr const char* kAwkwardErrorExported = "failed, \"badly\"\r\nsecond line \xE2\x9C\x93 \xEF\xBF\xBD end";

using Value = std::variant<std::monostate, std::int64_t, double, std::string, bool>;
using Row = std::map<std::string, Value>;

Value real(double v) { return std::isnan(v) ? Value{} : Value{v}; }
Value ns(double v) { return v < 0 ? Value{} : real(v); }
Value text(const std::string& s) { return s.empty() ? Value{} : Value{s}; }

// The fixed columns of each table, as docs/export.md lists them.
std::vector<std::string> fixed_columns(const std::string& what) {
  if (what == "runs")
    return {"run_id", "uuid", "experiment", "trial_id", "config_hash", "label", "repeat_index",
            "rank", "kind", "status", "error", "started_at", "finished_at", "duration_s", "seed",
            "fingerprint_hash", "load_average", "headline_metric", "headline_p50_ns",
            "headline_p90_ns", "samples_per_s", "tokens_per_s", "loss_final"};
  if (what == "samples")
    return {"run_id", "step", "warmup", "profiled", "wall_ns", "data_ns", "h2d_ns", "forward_ns",
            "backward_ns", "optimizer_ns", "comm_ns", "loss", "lr", "grad_norm", "loss_scale",
            "skipped", "rank_max_ns", "rank_median_ns"};
  if (what == "summaries")
    return {"run_id", "metric", "unit", "n", "mean", "stddev", "min", "p5", "p50", "p90", "p95",
            "p99", "max", "cv"};
  return {"run_id", "name", "value", "unit"};
}

// What the store holds, keyed as the export's rows are: "RUN" (runs),
// "RUN/STEP" (samples), "RUN/METRIC" (summaries), "RUN/NAME" (metrics).
std::map<std::string, Row> expected_rows(const fs::path& db_path, const std::string& what) {
  const auto db = runner::store::Store::open_read_only(db_path);
  std::map<std::string, Row> rows;
  for (const auto& listed : db.list_runs(1000)) {
    const auto run = db.get_run(listed.id);
    EXPECT_TRUE(run.has_value());
    if (!run) continue;
    const std::string id = std::to_string(run->row.id);
    const auto config = nlohmann::json::parse(run->config_json);
    // Two configuration columns: a plugin option under its section, a top-level key.
    Row config_cells;
    if (config.contains("optimizer"))
      config_cells["optimizer.lr"] = config["optimizer"]["options"]["lr"].get<double>();
    else
      config_cells["optimizer.lr"] = Value{};
    config_cells["config.seed"] = config["seed"].get<std::int64_t>();
    const auto with_config = [&](Row row) {
      row.insert(config_cells.begin(), config_cells.end());
      return row;
    };
    if (what == "runs") {
      const auto metric = [&](const std::string& name) -> Value {
        for (const auto& m : run->metrics)
          if (m.name == name) return real(m.value);
        return {};
      };
      Value p90;
      for (const auto& s : run->summaries)
        if (s.metric == runner::headline_metric(run->row.kind)) p90 = real(s.p90);
      rows[id] = with_config(
          {{"run_id", run->row.id}, {"uuid", run->uuid}, {"experiment", run->row.experiment},
           {"trial_id", run->row.trial_id}, {"config_hash", run->config_hash},
           {"label", text(run->row.label)}, {"repeat_index", run->row.repeat_index},
           {"rank", run->rank}, {"kind", std::string(runner::to_string(run->row.kind))},
           {"status", std::string(runner::store::to_string(run->row.status))},
           {"error", text(run->error == kAwkwardError ? kAwkwardErrorExported : run->error)},
           {"started_at", run->row.started_at},
           {"finished_at", text(run->row.finished_at)}, {"seed", run->seed},
           {"fingerprint_hash", text(run->fingerprint_hash)},
           {"load_average", real(run->load_average)},
           {"headline_metric", std::string(runner::headline_metric(run->row.kind))},
           {"headline_p50_ns", run->row.headline ? real(*run->row.headline) : Value{}},
           {"headline_p90_ns", p90}, {"samples_per_s", metric("samples_per_s")},
           {"tokens_per_s", metric("tokens_per_s")}, {"loss_final", metric("loss_final")}});
    } else if (what == "samples") {
      for (const auto& s : db.samples(run->row.id)) {
        Row row = {{"run_id", run->row.id}, {"step", s.step}, {"warmup", std::int64_t{s.warmup}},
                   {"profiled", std::int64_t{s.profiled}}, {"wall_ns", ns(s.wall_ns)},
                   {"loss", real(s.loss)}, {"lr", real(s.lr)}, {"grad_norm", real(s.grad_norm)},
                   {"loss_scale", real(s.loss_scale)},
                   {"skipped", s.skipped < 0 ? Value{} : Value{std::int64_t{s.skipped}}},
                   {"rank_max_ns", ns(s.rank_max_ns)}, {"rank_median_ns", ns(s.rank_median_ns)}};
        for (const auto& phase : runner::store::kPhases)
          row[phase.column] = ns(s.phase(phase.phase));
        rows[id + "/" + std::to_string(s.step)] = with_config(row);
      }
    } else if (what == "summaries") {
      for (const auto& s : run->summaries)
        rows[id + "/" + s.metric] = with_config(
            {{"run_id", run->row.id}, {"metric", s.metric}, {"unit", s.unit}, {"n", s.n},
             {"mean", real(s.mean)}, {"stddev", real(s.stddev)}, {"min", real(s.min)},
             {"p5", real(s.p5)}, {"p50", real(s.p50)}, {"p90", real(s.p90)}, {"p95", real(s.p95)},
             {"p99", real(s.p99)}, {"max", real(s.max)}, {"cv", real(s.cv)}});
    } else {
      for (const auto& m : run->metrics)
        rows[id + "/" + m.name] = with_config(
            {{"run_id", run->row.id}, {"name", m.name}, {"value", real(m.value)}, {"unit", m.unit}});
    }
  }
  return rows;
}

std::string describe(const Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "NULL";
        else if constexpr (std::is_same_v<T, std::string>) return "'" + x + "'";
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else {
          char buffer[64];
          std::snprintf(buffer, sizeof buffer, "%.17g", static_cast<double>(x));
          return buffer;
        }
      },
      v);
}

// How a reader gives values back: every value as text (Python's csv module),
// typed from CSV (pandas.read_csv: an empty text is NULL, CSV cannot tell
// them apart), or typed.
enum class Reading { strings, typed_from_csv, typed };

// Whether a value read back equals the stored one exactly.
bool same(const Value& expected, const nlohmann::json& got, Reading reading) {
  if (reading == Reading::typed_from_csv && expected == Value{std::string()}) return got.is_null();
  if (reading == Reading::strings) {
    const std::string s = got.get<std::string>();
    return std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::monostate>) return s.empty();
          else if constexpr (std::is_same_v<T, std::string>) return s == x;
          else if constexpr (std::is_same_v<T, bool>) return s == (x ? "true" : "false");
          else if constexpr (std::is_same_v<T, std::int64_t>) return s == std::to_string(x);
          else return !s.empty() && std::strtod(s.c_str(), nullptr) == x;
        },
        expected);
  }
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return got.is_null();
        else if constexpr (std::is_same_v<T, std::string>) return got.is_string() && got == x;
        else if constexpr (std::is_same_v<T, bool>) return got.is_boolean() && got == x;
        else if constexpr (std::is_same_v<T, std::int64_t>)
          return got.is_number() && got.get<double>() == static_cast<double>(x) &&
                 (!got.is_number_integer() || got.get<std::int64_t>() == x);
        else if (std::isinf(x)) return got == (x > 0 ? "inf" : "-inf");
        else return got.is_number() && got.get<double>() == x;
      },
      expected);
}

class ExportCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new runner::test::TempDir("runner-export-cli-");
    db_ = tmp_->path() / "runs.db";
    runner::test::record_runs_of_every_status(tmp_->path(), db_, 1);
    if (::testing::Test::HasFatalFailure()) return;

    // Text from the store can hold anything; and an experiment without runs.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE runs SET error = ?1 WHERE status = 'failed'", -1,
                                 &stmt, nullptr),
              SQLITE_OK);
    sqlite3_bind_text(stmt, 1, kAwkwardError, -1, SQLITE_STATIC);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    EXPECT_EQ(sqlite3_exec(db,
                           "INSERT INTO experiments (name, source_sha256) VALUES ('empty', 'x');"
                           "INSERT INTO trials (experiment_id, config_json, config_hash, identity) "
                           "VALUES (last_insert_rowid(), '{}', 'x', 'x');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }

  Result exported(const std::string& args) const {
    return runner::test::run_runner("export " + args, dir_.path(), {db_, {}});
  }

  // Reads `file` back with read_back.py's `reader` (Python: `python`);
  // an empty object when the reader is missing (pandas: exit 4).
  nlohmann::json read_back(const std::string& python, const std::string& reader,
                           const fs::path& file) const {
    const fs::path result = dir_.path() / ("read-" + reader + ".json");
    const fs::path log = dir_.path() / ("read-" + reader + ".log");
    const std::string cmd = python + " " + kReadBack + " " + reader + " " + file.string() + " " +
                            result.string() + " >" + log.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 4) return nlohmann::json::object();
    EXPECT_EQ(code, 0) << cmd << "\n" << slurp(log);
    return nlohmann::json::parse(slurp(result));
  }

  // Every row read back equals the store's, column by column, and every
  // stored row is there; the fixed columns come first, in order.
  void expect_store_values(const std::string& what, const nlohmann::json& read, Reading reading) const {
    ASSERT_TRUE(read.contains("columns")) << read.dump();
    const auto columns = read["columns"].get<std::vector<std::string>>();
    const auto fixed = fixed_columns(what);
    ASSERT_GE(columns.size(), fixed.size());
    EXPECT_EQ(std::vector<std::string>(columns.begin(), columns.begin() + fixed.size()), fixed);
    std::map<std::string, std::size_t> at;
    for (std::size_t i = 0; i < columns.size(); ++i) at[columns[i]] = i;
    EXPECT_EQ(at.size(), columns.size()) << "duplicate column names";
    const auto expected = expected_rows(db_, what);
    const std::string second = what == "runs"        ? ""
                               : what == "samples"   ? "step"
                               : what == "summaries" ? "metric"
                                                     : "name";
    const auto key_part = [&](const nlohmann::json& v) {
      if (v.is_string()) return v.get<std::string>();
      return std::to_string(static_cast<std::int64_t>(v.get<double>()));
    };
    std::set<std::string> seen;
    for (const auto& row : read["rows"]) {
      std::string key = key_part(row[at.at("run_id")]);
      if (!second.empty()) key += "/" + key_part(row[at.at(second)]);
      EXPECT_TRUE(seen.insert(key).second) << "row " << key << " twice";
      const auto it = expected.find(key);
      if (it == expected.end()) {
        ADD_FAILURE() << what << ": row " << key << " is not in the store";
        continue;
      }
      for (const auto& [column, value] : it->second) {
        ASSERT_TRUE(at.count(column)) << what << ": no column " << column;
        const nlohmann::json& got = row[at.at(column)];
        EXPECT_TRUE(same(value, got, reading))
            << what << " row " << key << " column " << column << ": stored " << describe(value)
            << ", read back " << got.dump();
      }
    }
    EXPECT_EQ(seen.size(), expected.size()) << what;
  }

  runner::test::TempDir dir_{"runner-export-case-"};
  static inline runner::test::TempDir* tmp_ = nullptr;
  static inline fs::path db_;
};

const std::vector<std::string> kWhats = {"runs", "samples", "summaries", "metrics"};

TEST_F(ExportCliTest, TheDatabaseHoldsWhatTheTestsNeed) {
  const auto runs = expected_rows(db_, "runs");
  std::set<std::string> statuses;
  for (const auto& [key, row] : runs) statuses.insert(std::get<std::string>(row.at("status")));
  EXPECT_EQ(statuses, (std::set<std::string>{"finished", "failed", "interrupted"}));
  EXPECT_EQ(runs.size(), 5u);
  EXPECT_GT(expected_rows(db_, "samples").size(), 60u);
}

TEST_F(ExportCliTest, CsvReadByPythonsCsvModuleHoldsTheStoredValues) {
  for (const std::string& what : kWhats) {
    const fs::path out = dir_.path() / (what + ".csv");
    const Result r = exported(std::string(kAll) + " --what " + what + " --out " + out.string());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("wrote " + out.string() + " (", 0), 0u) << r.out;
    expect_store_values(what, read_back("python3", "csv", out), Reading::strings);
    // The same bytes on standard output.
    const Result stdout_copy = exported(std::string(kAll) + " --what " + what);
    EXPECT_EQ(stdout_copy.out, slurp(out));
  }
  const std::string runs = slurp(dir_.path() / "runs.csv");
  EXPECT_NE(runs.find("\"failed, \"\"badly\"\"\r\nsecond line"), std::string::npos);
}

TEST_F(ExportCliTest, JsonReadByPythonsJsonModuleHoldsTheStoredValues) {
  for (const std::string& what : kWhats) {
    const fs::path out = dir_.path() / (what + ".json");
    const Result r = exported(std::string(kAll) + " --what " + what + " --format json --out " +
                              out.string());
    ASSERT_EQ(r.code, 0) << r.err;
    expect_store_values(what, read_back("python3", "json", out), Reading::typed);
  }
  const auto runs = nlohmann::json::parse(slurp(dir_.path() / "runs.json"));
  bool found = false;
  for (const auto& run : runs) found = found || run["error"] == kAwkwardErrorExported;
  EXPECT_TRUE(found) << runs.dump();
}

TEST_F(ExportCliTest, PandasReadsCsvAndJsonInOneCallWithTheStoredValues) {
  if (std::string(kPython).empty()) GTEST_SKIP() << "no RUNNER_PYTHON in this build";
  for (const std::string& what : kWhats) {
    for (const std::string format : {"csv", "json"}) {
      const fs::path out = dir_.path() / (what + "." + format);
      const Result r = exported(std::string(kAll) + " --what " + what + " --format " + format +
                                " --out " + out.string());
      ASSERT_EQ(r.code, 0) << r.err;
      const nlohmann::json read = read_back(kPython, "pandas-" + format, out);
      if (read.empty()) GTEST_SKIP() << kPython << " has no pandas (scripts/dev installs it)";
      expect_store_values(what, read, format == "csv" ? Reading::typed_from_csv : Reading::typed);
    }
  }
}

TEST_F(ExportCliTest, ParquetKeepsTheTypesAndTheStoredValues) {
  if (std::string(kPython).empty()) GTEST_SKIP() << "no RUNNER_PYTHON in this build";
  ASSERT_EQ(::setenv("RUNNER_PYTHON", kPython, 1), 0);
  for (const std::string& what : kWhats) {
    const fs::path out = dir_.path() / (what + ".parquet");
    const Result r = exported(std::string(kAll) + " --what " + what + " --format parquet --out " +
                              out.string());
    if (r.err.find("needs pyarrow") != std::string::npos)
      GTEST_SKIP() << kPython << " has no pyarrow (scripts/dev installs it)";
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json read = read_back(kPython, "pandas-parquet", out);
    if (read.empty()) GTEST_SKIP() << kPython << " has no pandas (scripts/dev installs it)";
    expect_store_values(what, read, Reading::typed);
    // Arrow types: integers int64, measurements double, text string.
    const auto columns = read["columns"].get<std::vector<std::string>>();
    const auto types = read["arrow_types"].get<std::vector<std::string>>();
    std::map<std::string, std::string> type_of;
    for (std::size_t i = 0; i < columns.size(); ++i) type_of[columns[i]] = types.at(i);
    EXPECT_EQ(type_of["run_id"], "int64");
    EXPECT_EQ(type_of["config.seed"], "int64");
    EXPECT_EQ(type_of["optimizer.lr"], "double");
    EXPECT_EQ(type_of["kernel.shape"], "string");
    if (what == "runs") {
      EXPECT_EQ(type_of["status"], "string");
      EXPECT_EQ(type_of["error"], "string");
      EXPECT_EQ(type_of["headline_p50_ns"], "double");
      EXPECT_EQ(type_of["repeat_index"], "int64");
    } else if (what == "samples") {
      EXPECT_EQ(type_of["step"], "int64");
      EXPECT_EQ(type_of["skipped"], "int64");  // all NULL here, typed all the same
      EXPECT_EQ(type_of["comm_ns"], "double");
      EXPECT_EQ(type_of["wall_ns"], "double");
    } else if (what == "summaries") {
      EXPECT_EQ(type_of["n"], "int64");
      EXPECT_EQ(type_of["p99"], "double");
    } else {
      EXPECT_EQ(type_of["value"], "double");
      EXPECT_EQ(type_of["unit"], "string");
    }
    // pandas: a column without NULLs keeps int64.
    const auto dtypes = read["dtypes"].get<std::vector<std::string>>();
    EXPECT_EQ(dtypes.at(0), "int64") << what;
  }
  ::unsetenv("RUNNER_PYTHON");
}

TEST_F(ExportCliTest, ParquetUsesTheBuildsPythonWithoutRunnerPython) {
  if (std::string(kPython).empty()) GTEST_SKIP() << "no RUNNER_PYTHON in this build";
  ::unsetenv("RUNNER_PYTHON");
  const fs::path out = dir_.path() / "default.parquet";
  const Result r = exported("1 --format parquet --out " + out.string());
  if (r.err.find("needs pyarrow") != std::string::npos)
    GTEST_SKIP() << kPython << " has no pyarrow (scripts/dev installs it)";
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("wrote " + out.string() + " (1 row(s), ", 0), 0u) << r.out;
  EXPECT_TRUE(fs::exists(out));
}

TEST_F(ExportCliTest, AnEmptyTableIsStillATableWithItsColumns) {
  // The run that failed at step 2 has samples but no summaries.
  ASSERT_EQ(expected_rows(db_, "summaries").count("3/step_time"), 0u);
  const Result csv = exported("experiment:failing --what summaries");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("run_id,metric,unit,n,mean,stddev,min,p5,p50,p90,p95,p99,max,cv,config.kind,", 0), 0u)
      << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 1) << csv.out;
  const Result json = exported("experiment:failing --what summaries --format json");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out, "[]\n");
  if (std::string(kPython).empty()) return;
  ASSERT_EQ(::setenv("RUNNER_PYTHON", kPython, 1), 0);
  const fs::path out = dir_.path() / "empty.parquet";
  const Result parquet =
      exported("experiment:failing --what summaries --format parquet --out " + out.string());
  ::unsetenv("RUNNER_PYTHON");
  if (parquet.err.find("needs pyarrow") != std::string::npos) return;
  ASSERT_EQ(parquet.code, 0) << parquet.err;
  EXPECT_EQ(parquet.out.rfind("wrote " + out.string() + " (0 row(s), ", 0), 0u) << parquet.out;
  const nlohmann::json read = read_back(kPython, "pandas-parquet", out);
  if (read.empty()) return;
  EXPECT_EQ(read["rows"].size(), 0u);
  EXPECT_EQ(read["arrow_types"][3], "int64");  // n
  EXPECT_EQ(read["arrow_types"][4], "double");  // mean
}

// Each bad input exits 2 with its message, and leaves no file at --out (an
// existing one unchanged) and no temporary file beside it.
TEST_F(ExportCliTest, BadInputIsAnInputErrorAndLeavesNothingBehind) {
  const fs::path folder = dir_.path() / "target";
  fs::create_directory(folder);
  const fs::path kept = folder / "kept.csv";
  runner::test::write_file(kept, "old content\n");
  const auto expect_refused = [&](const std::string& args, const std::string& err) {
    const Result r = exported(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err, err) << args;
    EXPECT_EQ(r.out, "") << args;
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename());
    EXPECT_EQ(names, (std::set<std::string>{"kept.csv"})) << args;
    EXPECT_EQ(slurp(kept), "old content\n") << args;
  };
  const std::string out = " --out " + (folder / "x.csv").string();
  expect_refused("experiment:empty" + out,
                 "error: 'experiment:empty' matches no run in the database\n"
                 "hint: run 'runner runs' to list the recorded runs\n");
  expect_refused("experiment:empty --out " + kept.string(),
                 "error: 'experiment:empty' matches no run in the database\n"
                 "hint: run 'runner runs' to list the recorded runs\n");
  expect_refused("experiment:nope" + out,
                 "error: no experiment named 'nope' in the database\n"
                 "hint: run 'runner runs' to see the recorded experiments\n");
  expect_refused("run:1,999" + out,
                 "error: run 999 is not in the database\n"
                 "hint: run 'runner runs' to list the recorded runs\n");
  expect_refused("1 --format xlsx" + out, "error: --format must be csv, json or parquet, found 'xlsx'\n");
  expect_refused("1 --what steps" + out,
                 "error: --what must be runs, samples, summaries or metrics, found 'steps'\n");
  expect_refused("1 --format parquet",
                 "error: --format parquet needs --out FILE\n"
                 "hint: parquet is a binary file, not for a terminal: e.g. --out runs.parquet\n");
  const fs::path missing = folder / "no-such-folder" / "x.csv";
  expect_refused("1 --out " + missing.string(),
                 "error: cannot write " + missing.string() + ": No such file or directory\n"
                 "hint: choose a file in a directory that exists and that you can write\n");
  expect_refused("1 --out " + folder.string(),
                 "error: cannot write " + folder.string() + ": it is a directory\n"
                 "hint: give the path of a file inside it, e.g. " + (folder / "out.csv").string() +
                     "\n");
  // Checked before anything is read: a bad --out wins over a bad selector.
  expect_refused("experiment:nope --out " + missing.string(),
                 "error: cannot write " + missing.string() + ": No such file or directory\n"
                 "hint: choose a file in a directory that exists and that you can write\n");

  // Parquet with a Python that has no pyarrow (Debian's own python3), and
  // with one that does not exist.
  const int has_pyarrow = std::system("/usr/bin/python3 -c 'import pyarrow' >/dev/null 2>&1");
  if (has_pyarrow == 0) GTEST_SKIP() << "/usr/bin/python3 has pyarrow: cannot test its absence";
  ASSERT_EQ(::setenv("RUNNER_PYTHON", "/usr/bin/python3", 1), 0);
  expect_refused("1 --format parquet --out " + (folder / "x.parquet").string(),
                 "error: --format parquet needs pyarrow, which /usr/bin/python3 cannot import "
                 "(No module named 'pyarrow')\n"
                 "hint: install it into that Python ('/usr/bin/python3 -m pip install pyarrow'), "
                 "or set RUNNER_PYTHON to a Python that has it\n");
  expect_refused("1 --format parquet --out " + kept.string(),
                 "error: --format parquet needs pyarrow, which /usr/bin/python3 cannot import "
                 "(No module named 'pyarrow')\n"
                 "hint: install it into that Python ('/usr/bin/python3 -m pip install pyarrow'), "
                 "or set RUNNER_PYTHON to a Python that has it\n");
  ASSERT_EQ(::setenv("RUNNER_PYTHON", (folder / "no-python").c_str(), 1), 0);
  expect_refused("1 --format parquet --out " + (folder / "x.parquet").string(),
                 "error: --format parquet: cannot run the Python '" + (folder / "no-python").string() +
                     "': No such file or directory\n"
                     "hint: parquet is written by pyarrow: set RUNNER_PYTHON to a Python that has "
                     "it (python3 -m pip install pyarrow)\n");
  ::unsetenv("RUNNER_PYTHON");
}

}  // namespace
