// End to end: the runner executable on small experiments against temporary
// databases, checking exit codes, exact messages, and the rows written.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <toml++/toml.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "runner/store/store.hpp"
#include "runner/version.hpp"
#include "support/cli_harness.hpp"
#include "support/foreign_sqlite.hpp"
#include "support/python_oracle.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;

class CliTest : public runner::test::CliTestBase {
 protected:
  CliTest() : CliTestBase("runner-cli-") {}

  // Runs the CLI with the given arguments (shell-quoted here), capturing both streams.
  Result runner(const std::string& args) const { return runner::test::run_runner(args, dir_); }

  // One integer from a query on the test database.
  std::int64_t query(const std::string& sql) const { return runner::test::query_int(db_, sql); }
  std::string query_text(const std::string& sql) const {
    return runner::test::query_text(db_, sql);
  }

  std::string db_arg() const { return "--db " + db_.string(); }
};

const char* kSmallTrain = R"([experiment]
name = "cli-small"
repeats = 2

[model]
plugin = "mlp"
hidden = [16]

[data]
plugin = "synthetic"
shape = [8]
classes = 3
size = 256
batch_size = 16

[optimizer]
plugin = "sgd"
lr = 0.1

[train]
steps = 12
warmup = 3
)";

TEST_F(CliTest, RunRecordsExperimentTrialRunsSamplesAndFingerprint) {
  const fs::path file = write("small.toml", kSmallTrain);
  const Result r = runner("run " + file.string() + " " + db_arg());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cli-small (train, 1 trial(s), 2 run(s) now, 0 skipped as done)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("finished"), std::string::npos);
  EXPECT_EQ(query("SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(query("SELECT count(*) FROM trials"), 1);
  EXPECT_EQ(query("SELECT count(*) FROM fingerprints"), 1);
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'finished'"), 2);
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE finished_at IS NULL"), 0);
  EXPECT_EQ(query("SELECT count(*) FROM samples"), 2 * 15);
  EXPECT_EQ(query("SELECT count(*) FROM samples WHERE warmup = 1"), 2 * 3);
  EXPECT_EQ(query("SELECT count(*) FROM run_plugins"), 2 * 3);
  EXPECT_EQ(query("SELECT count(*) FROM run_plugins WHERE length(sha256) = 64"), 6);
  EXPECT_EQ(query("SELECT n FROM summaries WHERE metric = 'step_time' LIMIT 1"), 12);
  EXPECT_EQ(query("SELECT count(*) FROM metrics WHERE name = 'samples_per_s' AND value > 0"), 2);
  EXPECT_EQ(query("PRAGMA user_version"), runner::store::kSchemaVersion);
  EXPECT_EQ(query_text("SELECT json_extract(json, '$.\"gpu.name\"') FROM fingerprints"), "");

  // A second invocation resumes: everything is done, nothing runs.
  const Result again = runner("run " + file.string() + " " + db_arg());
  ASSERT_EQ(again.code, 0);
  EXPECT_NE(again.out.find("0 run(s) now, 2 skipped as done"), std::string::npos) << again.out;
  EXPECT_EQ(query("SELECT count(*) FROM runs"), 2);
  // --force runs again, reusing the experiment, trial and fingerprint rows.
  ASSERT_EQ(runner("run " + file.string() + " --force " + db_arg()).code, 0);
  EXPECT_EQ(query("SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(query("SELECT count(*) FROM trials"), 1);
  EXPECT_EQ(query("SELECT count(*) FROM fingerprints"), 1);
  EXPECT_EQ(query("SELECT count(*) FROM runs"), 4);

  const Result runs = runner("runs " + db_arg());
  ASSERT_EQ(runs.code, 0) << runs.err;
  EXPECT_NE(runs.out.find("cli-small"), std::string::npos);
  const Result show = runner("show 1 " + db_arg());
  ASSERT_EQ(show.code, 0) << show.err;
  for (const char* needle : {"status:   finished", "step_time", "samples_per_s", "mlp",
                             "fingerprint", "software.torch_version"})
    EXPECT_NE(show.out.find(needle), std::string::npos) << needle << "\n" << show.out;
  const Result missing = runner("show 99 " + db_arg());
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err, "error: run 99 is not in " + db_.string() +
                             "\nhint: run 'runner runs' to list the recorded runs\n");
}

TEST_F(CliTest, AFailedRunExitsOneAndIsRecordedWithItsError) {
  const fs::path file =
      write("fails.toml", runner::test::tiny_experiment({.model = "throw_at_step = 2", .steps = 5}));
  const Result r =
      runner("run " + file.string() + " " + db_arg() + " --plugin-path " +
             runner::test::test_plugins("good").string());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(query("SELECT count(*) FROM runs WHERE status = 'failed'"), 1);
  EXPECT_EQ(query_text("SELECT error FROM runs"),
            "model plugin 'tiny_linear' (" +
                fs::canonical(runner::test::test_plugins("good") / "runner_plugin_test_good.so")
                    .string() +
                ") failed in forward: forward failed on purpose");
  EXPECT_EQ(query("SELECT count(*) FROM samples"), 2);
}

// Each bad input exits 2 with one exact message and creates no database.
class BadInputTest : public CliTest {
 protected:
  void expect_rejected(const std::string& args, const std::string& expected_stderr) {
    const Result r = runner(args + " " + db_arg());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err, expected_stderr);
    EXPECT_FALSE(fs::exists(db_)) << "the database must not be created";
  }
};

TEST_F(BadInputTest, MissingExperimentFile) {
  const fs::path file = dir_ / "nope.toml";
  expect_rejected("run " + file.string(),
                  "error: cannot open experiment file '" + file.string() +
                      "': No such file or directory\n"
                      "hint: check the path; experiments/ holds ready-to-run examples\n");
}

TEST_F(BadInputTest, TomlSyntaxErrorHasFileLineColumnAndTheParsersDescription) {
  const std::string text = "[experiment]\nname = \"x\"\nseed = = 3\n";
  const fs::path file = write("syntax.toml", text);
  std::string description;
  int line = 0, column = 0;
  try {
    (void)toml::parse(text);
  } catch (const toml::parse_error& e) {
    description = std::string(e.description());
    line = static_cast<int>(e.source().begin.line);
    column = static_cast<int>(e.source().begin.column);
  }
  ASSERT_FALSE(description.empty());
  expect_rejected("run " + file.string(),
                  "error: " + file.string() + ":" + std::to_string(line) + ":" +
                      std::to_string(column) + ": invalid TOML: " + description + "\n");
}

TEST_F(BadInputTest, UnknownSectionSuggestsTheClosestOne) {
  const fs::path file = write("section.toml", std::string(kSmallTrain) + "\n[modle]\nx = 1\n");
  expect_rejected("run " + file.string(),
                  "error: " + file.string() +
                      ":24:1: unknown section [modle]; did you mean [model]?\n"
                      "hint: known sections: experiment, device, runtime, env, model, data, optimizer, "
                      "train, schedule, infer, eval, profile, distributed, comm_hook, kernel, plugins, sweep, "
                      "trial, expect\n");
}

TEST_F(BadInputTest, WrongTypeHasFileLineColumn) {
  std::string text = kSmallTrain;
  text.replace(text.find("steps = 12"), 10, "steps = \"12\"");
  const fs::path file = write("type.toml", text);
  expect_rejected("run " + file.string(),
                  "error: " + file.string() +
                      ":21:9: 'train.steps' must be an integer, found a string\n");
}

TEST_F(BadInputTest, OutOfRangeOptionOfAPlugin) {
  std::string text = kSmallTrain;
  text.replace(text.find("lr = 0.1"), 8, "lr = -1.0");
  const fs::path file = write("range.toml", text);
  expect_rejected("run " + file.string(),
                  "error: " + file.string() + ":18:6: 'optimizer.lr' must be >= 0, found -1\n"
                      "hint: run 'runner plugins describe sgd' to see its options\n");
}

TEST_F(BadInputTest, UnknownPluginListsTheAvailableOnes) {
  std::string text = kSmallTrain;
  text.replace(text.find("plugin = \"mlp\""), 14, "plugin = \"mpl\"");
  const fs::path file = write("plugin.toml", text);
  expect_rejected("run " + file.string(),
                  "error: " + file.string() +
                      ":6:10: unknown model plugin 'mpl'; did you mean 'mlp'?\n"
                      "hint: available model plugins: aoti, convnet, mlp, resnet, torchscript, "
                      "transformer_lm, vit; run "
                      "'runner plugins' to see what is loaded\n");
}

TEST_F(BadInputTest, MismatchedPluginAbiNamesTheFile) {
  const fs::path file = write("abi.toml", kSmallTrain);
  const fs::path lib =
      fs::canonical(runner::test::test_plugins("bad_abi") / "runner_plugin_test_bad_abi.so");
  const Result r = runner("run " + file.string() + " " + db_arg() + " --plugin-path " +
                          lib.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: plugin library '" + lib.string() +
                "' does not match this runner: SDK ABI version: expected " +
                std::to_string(RUNNER_SDK_ABI_VERSION) + ", found 999");
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(BadInputTest, EveryShippedExperimentValidates) {
  // experiments/ is what a newcomer runs first; each file must validate with
  // the built-in plugins alone, once the data sets the comments tell users to
  // make exist: a copy of the folder beside a small data/ written by
  // scripts/make_datasets.py (the files' paths are relative to them).
  RUNNER_REQUIRE_ORACLE("numpy,PIL");
  const fs::path experiments = dir_ / "experiments";
  fs::copy(fs::path(RUNNER_SOURCE_DIR) / "experiments", experiments, fs::copy_options::recursive);
  const auto made = runner::test::run_project_script(
      "scripts/make_datasets.py",
      {(dir_ / "data").string(), "--train", "20", "--eval", "5", "--image-size", "48"});
  ASSERT_EQ(made.code, 0) << made.output;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(experiments)) {
    if (entry.path().extension() != ".toml") continue;
    // Needs exported ResNet-18 and GPT packages (minutes of compiling):
    // CompiledCliTest.TheShippedComparisonValidatesAndEveryPathAgreesWithPyTorch
    // validates and runs it beside them.
    if (entry.path().filename() == "eager_vs_compiled.toml") continue;
    ++files;
    const Result r = runner("validate " + entry.path().string());
#if defined(__SANITIZE_ADDRESS__)
    // An AddressSanitizer build replaces malloc itself and refuses to preload
    // another allocator (the message is tested in environment_keys_test).
    if (entry.path().filename() == "allocators.toml") {
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find("cannot be preloaded into this runner: it is built with "
                           "AddressSanitizer"),
                std::string::npos)
          << r.err;
      continue;
    }
#endif
    EXPECT_EQ(r.code, 0) << entry.path() << "\n" << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), entry.path().string() + ": ok");
  }
  EXPECT_GE(files, 3);
}

TEST_F(BadInputTest, ALibraryThatIsNotARunnerPluginNeverRuns) {
  // Its constructor would write the marker and abort: validate must refuse it
  // from its file, exit 2, and never load it.
  const fs::path file = write("abi.toml", kSmallTrain);
  const fs::path marker = dir_ / "loaded";
  ::setenv("RUNNER_TEST_MARKER", marker.c_str(), 1);
  const fs::path lib = fs::canonical(runner::test::test_plugins("record_none") /
                                     "runner_plugin_test_record_none.so");
  const Result r = runner("validate " + file.string() + " --plugin-path " + lib.string());
  ::unsetenv("RUNNER_TEST_MARKER");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: '" + lib.string() +
                "' is not a runner plugin: it has no ABI record (no .runner_plugin_abi section)");
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(BadInputTest, UnwritableDatabasePath) {
  const fs::path file = write("ok.toml", kSmallTrain);
  db_ = dir_ / "no-such-dir" / "runs.db";
  expect_rejected("run " + file.string(),
                  "error: cannot write database '" + db_.string() +
                      "': No such file or directory\n"
                      "hint: choose a writable path with --db PATH or RUNNER_DB\n");
}

TEST_F(BadInputTest, AForeignDatabaseIsRefusedAndLeftByteForByte) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes (text TEXT)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string before = runner::test::slurp(db_);
  const fs::path file = write("small.toml", kSmallTrain);
  const Result r = runner("run " + file.string() + " " + db_arg());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: '" + db_.string() +
                       "' is not a runner database: it has tables but no runner schema version\n"
                       "hint: choose another file with --db PATH or RUNNER_DB\n");
  EXPECT_EQ(runner::test::slurp(db_), before);
}

TEST_F(BadInputTest, AForeignExperimentsTableIsRefusedAtEveryVersionAndLeftByteForByte) {
  // issue 30 item 2: user_version 1, 2 and 11 used to pass the read-only
  // check and be switched to WAL before being refused (11 with exit 1).
  const fs::path file = write("small.toml", kSmallTrain);
  for (const long long version : runner::test::foreign_user_versions()) {
    runner::test::write_foreign_sqlite(db_, version);
    const std::string before = runner::test::slurp(db_);
    const Result r = runner("run " + file.string() + " " + db_arg());
    EXPECT_EQ(r.code, 2) << version;
    const std::string hint = version > runner::store::kSchemaVersion
                                 ? "upgrade runner, or use another database with --db"
                                 : "choose another file with --db PATH or RUNNER_DB";
    EXPECT_EQ(r.err, "error: " + runner::test::foreign_refusal(db_, version) + "\nhint: " + hint +
                         "\n");
    EXPECT_EQ(runner::test::slurp(db_), before) << version;
    EXPECT_FALSE(fs::exists(db_.string() + "-wal")) << version;
    EXPECT_FALSE(fs::exists(db_.string() + "-shm")) << version;
  }
}

TEST_F(BadInputTest, AnEmptyDatabasePathIsRefusedBeforeAnythingRuns) {
  const fs::path file = write("small.toml", kSmallTrain);
  const Result r = runner("run " + file.string() + " --db ''");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --db must name a file, found an empty path\n"
                   "hint: pass --db PATH, or leave --db out for ./runner.db (or RUNNER_DB)\n");
  EXPECT_FALSE(fs::exists(dir_ / "runner.db"));
}

TEST_F(BadInputTest, AnExistingDatabaseIsLeftUnchanged) {
  const fs::path good = write("good.toml", kSmallTrain);
  ASSERT_EQ(runner("run " + good.string() + " " + db_arg()).code, 0);
  const std::int64_t runs = query("SELECT count(*) FROM runs");
  const fs::path bad = write("bad.toml", std::string(kSmallTrain) + "\n[train2]\n");
  const Result r = runner("run " + bad.string() + " " + db_arg());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(query("SELECT count(*) FROM runs"), runs);
}

TEST_F(CliTest, UsageErrorsAndHelp) {
  Result r = runner("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("runner ") + RUNNER_VERSION_STRING + "\n");
  for (const char* command : {"run", "validate", "plugins", "plugins describe", "runs", "show"}) {
    r = runner(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_EQ(r.out.rfind("usage: runner " + std::string(command), 0), 0u) << r.out;
    EXPECT_NE(r.out.find("--db PATH"), std::string::npos) << command;
  }
  r = runner("rnu x.toml");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: unknown command 'rnu'; did you mean 'run'?\n"
                   "hint: run 'runner --help' to see the commands\n");
  r = runner("run x.toml --dbb y.db");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: runner run: unknown option '--dbb'; did you mean '--db'?\n"
                   "hint: run 'runner run --help' for usage\n");
  r = runner("run");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: runner run: missing FILE\nhint: usage: runner run FILE [FILE...] [options]\n");
}

TEST_F(CliTest, PluginsListAndDescribe) {
  Result r = runner("plugins");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"mlp", "sgd", "synthetic"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  r = runner("plugins describe mlp");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mlp (model plugin)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hidden      int[]   [256, 256]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("relu|gelu|tanh"), std::string::npos) << r.out;
  // Integer bounds print as integers, number bounds as numbers.
  EXPECT_NE(r.out.find("1..1048576"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.0..0.99"), std::string::npos) << r.out;
  r = runner("plugins describe mpl");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: unknown plugin 'mpl'; did you mean 'mlp'?\n"
                   "hint: run 'runner plugins' to see what is loaded\n");
}

TEST_F(CliTest, ValidateChecksWithoutWriting) {
  const fs::path file = write("v.toml", kSmallTrain);
  const Result r = runner("validate " + file.string() + " " + db_arg());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(file.string() + ": ok\n", 0), 0u) << r.out;
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(CliTest, RunsOnAMissingDatabaseIsAnInputError) {
  const Result r = runner("runs " + db_arg());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: database '" + db_.string() + "' does not exist\n"
                   "hint: run an experiment first with 'runner run FILE', or pass --db PATH\n");
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(CliTest, ErrorsQuoteUserInputEscaped) {
  // An ESC in a --set argument could recolour or clear the terminal if the
  // error repeated it raw.
  const fs::path file = write("small.toml", kSmallTrain);
  const Result r = runner("validate " + file.string() + " --set 'train.st\x1b[2Jeps=3'");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: --set train.st\\e[2Jeps=3: unknown key 'train.st\\e[2Jeps'");
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
}

TEST_F(CliTest, TextFromTheStoreIsEscapedOnTheTerminal) {
  const fs::path file = write("small.toml", kSmallTrain);
  ASSERT_EQ(runner("run " + file.string() + " " + db_arg() + " --set experiment.repeats=1").code, 0);
  // Another client (or an older runner) wrote control characters into the store.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE experiments SET name = 'red' || char(27) || '[31m' || char(13) || "
                         "char(8) || char(155) || 'x'; UPDATE runs SET error = 'line' || char(10) "
                         "|| 'two' || char(0) || 'nul'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const Result runs = runner("runs " + db_arg());
  ASSERT_EQ(runs.code, 0) << runs.err;
  EXPECT_NE(runs.out.find("red\\e[31m\\r\\x08\\u009bx"), std::string::npos) << runs.out;
  const Result show = runner("show 1 " + db_arg());
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("run 1  red\\e[31m\\r\\x08\\u009bx  (train"), std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("error:    line\\ntwo\\x00nul\n"), std::string::npos) << show.out;
  for (const std::string* out : {&runs.out, &show.out})
    for (const char c : *out) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20);
}

}  // namespace
