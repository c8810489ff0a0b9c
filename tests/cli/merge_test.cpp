// End to end: `runner merge` on shard databases written through the store,
// checking exit codes, exact messages, the report and the rows merged.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runner/store/store.hpp"
#include "support/cli_harness.hpp"
#include "support/foreign_sqlite.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;
using runner::test::slurp;

class MergeCliTest : public runner::test::CliTestBase {
 protected:
  MergeCliTest() : CliTestBase("runner-merge-cli-") {}

  Result runner(const std::string& args) const { return runner::test::run_runner(args, dir_); }

  /// A shard as `runner run --shard K/N` leaves it: the shared experiment,
  /// the given trials with two finished runs each (three samples per run).
  static void write_shard(const fs::path& path, const std::vector<std::string>& trials) {
    using runner::store::RunStart;
    using runner::store::Sample;
    runner::store::Store store = runner::store::Store::open(path);
    const auto e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
    const auto fp = store.upsert_fingerprint("fp", "{}");
    for (const auto& t : trials) {
      const auto trial = store.upsert_trial(e, "{\"t\":\"" + t + "\"}", "h-" + t, t, "t=" + t);
      for (int repeat = 0; repeat < 2; ++repeat) {
        RunStart start;
        start.trial_id = trial;
        start.fingerprint_id = fp;
        start.repeat_index = repeat;
        start.kind = runner::RunKind::train;
        const auto run = store.begin_run(start);
        store.add_samples(run, {Sample{0, true, 10}, Sample{1, false, 9}, Sample{2, false, 8}});
        // Two evaluation values and one weights file per run (schema 5).
        store.finish_run(run, runner::store::RunStatus::finished, "", {},
                         {{"samples_per_s", 1, "1/s"}}, 0,
                         {{10, "loss", 0.5}, {10, "accuracy", 0.75}},
                         {{"save_to", "/w/" + t + ".safetensors", std::string(64, 'a'), 1234, ""}});
      }
    }
  }

  static std::int64_t query(const fs::path& db_path, const std::string& sql) {
    return runner::test::query_int(db_path, sql);
  }

  static std::string integrity(const fs::path& db_path) {
    return runner::test::query_text(db_path, "PRAGMA integrity_check");
  }

  const fs::path a_ = dir_ / "a.db", b_ = dir_ / "b.db", all_ = dir_ / "all.db";
};

TEST_F(MergeCliTest, MergesShardsAndReportsWhatItAdded) {
  write_shard(a_, {"t1", "t2"});
  write_shard(b_, {"t2", "t3"});
  const std::string a_bytes = slurp(a_);
  const Result r = runner("merge " + a_.string() + " " + b_.string() + " --into " + all_.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, a_.string() + ": 4 run(s) added, 0 already present\n" + b_.string() +
                       ": 4 run(s) added, 0 already present\n"
                       "\n"
                       "table           added  already present\n"
                       "experiments         1                1\n"
                       "trials              3                1\n"
                       "fingerprints        1                1\n"
                       "runs                8                0\n"
                       "run_plugins         0                0\n"
                       "samples            24                0\n"
                       "summaries           0                0\n"
                       "metrics             8                0\n"
                       "evaluations        16                0\n"
                       "run_files           8                0\n"
                       "run_attributes      0                0\n"
                       "run_ops             0                0\n"
                       "run_labels          0                0\n"
                       "merged 2 database(s) into " + all_.string() + "\n");
  EXPECT_EQ(query(all_, "SELECT count(*) FROM experiments"), 1);
  EXPECT_EQ(query(all_, "SELECT count(*) FROM trials"), 3);
  EXPECT_EQ(query(all_, "SELECT count(*) FROM runs"), 8);
  EXPECT_EQ(query(all_, "SELECT count(*) FROM samples"), 24);
  EXPECT_EQ(query(all_, "SELECT count(*) FROM evaluations"), 16);
  EXPECT_EQ(query(all_, "SELECT count(*) FROM run_files"), 8);
  EXPECT_EQ(query(all_, "SELECT count(DISTINCT uuid) FROM runs"), 8);
  EXPECT_EQ(query(all_, "PRAGMA user_version"), runner::store::kSchemaVersion);
  EXPECT_EQ(integrity(all_), "ok");
  // The inputs are read, never written.
  EXPECT_EQ(slurp(a_), a_bytes);
}

TEST_F(MergeCliTest, MergingAgainAddsNothing) {
  write_shard(a_, {"t1"});
  ASSERT_EQ(runner("merge " + a_.string() + " --into " + all_.string()).code, 0);
  const Result r = runner("merge " + a_.string() + " --into " + all_.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            a_.string() + ": 0 run(s) added, 2 already present");
  EXPECT_NE(r.out.find("runs                0                2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("evaluations         0                4\n"
                       "run_files           0                2\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(query(all_, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(integrity(all_), "ok");
}

TEST_F(MergeCliTest, MissingInputIsBadInputAndWritesNothing) {
  write_shard(a_, {"t1"});
  const fs::path missing = dir_ / "missing.db";
  const Result r =
      runner("merge " + a_.string() + " " + missing.string() + " --into " + all_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: database '" + missing.string() +
                       "' does not exist\nhint: check the paths of the databases to merge\n");
  EXPECT_FALSE(fs::exists(all_));
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(MergeCliTest, ForeignInputIsBadInputAndWritesNothing) {
  write_shard(a_, {"t1"});
  runner::test::write_file(b_, std::string(300, 'x'));
  const Result r = runner("merge " + a_.string() + " " + b_.string() + " --into " + all_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: '" + b_.string() + "' is not a runner database: file is not a database");
  EXPECT_FALSE(fs::exists(all_));
}

TEST_F(MergeCliTest, AForeignTargetIsRefusedAndLeftByteForByte) {
  write_shard(a_, {"t1"});
  // Another application's SQLite file, in rollback-journal mode.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(all_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('x')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string before = slurp(all_);
  const Result r = runner("merge " + a_.string() + " --into " + all_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: '" + all_.string() +
                "' is not a runner database: it has tables but no runner schema version");
  EXPECT_EQ(slurp(all_), before);
  EXPECT_FALSE(fs::exists(all_.string() + "-wal"));
}

TEST_F(MergeCliTest, AForeignTargetIsRefusedAtEveryVersionAndLeftByteForByte) {
  // issue 30 item 2: a foreign `experiments` table at any user_version.
  write_shard(a_, {"t1"});
  for (const long long version : runner::test::foreign_user_versions()) {
    runner::test::write_foreign_sqlite(all_, version);
    const std::string before = slurp(all_);
    const Result r = runner("merge " + a_.string() + " --into " + all_.string());
    EXPECT_EQ(r.code, 2) << version;
    EXPECT_EQ(r.out, "") << version;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
              "error: " + runner::test::foreign_refusal(all_, version));
    EXPECT_EQ(slurp(all_), before) << version;
    EXPECT_FALSE(fs::exists(all_.string() + "-wal")) << version;
    EXPECT_FALSE(fs::exists(all_.string() + "-shm")) << version;
  }
}

TEST_F(MergeCliTest, MergingADatabaseIntoItselfIsAnError) {
  write_shard(a_, {"t1"});
  const std::string before = slurp(a_);
  const Result r = runner("merge " + a_.string() + " --into " + a_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: cannot merge database '" + a_.string() +
                       "' into itself\nhint: name another output file with --into\n");
  EXPECT_EQ(slurp(a_), before);
}

TEST_F(MergeCliTest, ConflictingInputsLeaveNoOutputBehind) {
  write_shard(a_, {"t1"});
  {
    runner::store::Store store = runner::store::Store::open(b_);
    const auto e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
    store.upsert_trial(e, "{\"t\":\"other\"}", "h-t1", "t1", "");
  }
  const Result r = runner("merge " + a_.string() + " " + b_.string() + " --into " + all_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: cannot merge database '" + b_.string() +
                       "': trial t1 of experiment 'sweep' is already stored with a different "
                       "configuration\n");
  EXPECT_FALSE(fs::exists(all_));
  // An existing output is left as it was.
  ASSERT_EQ(runner("merge " + a_.string() + " --into " + all_.string()).code, 0);
  EXPECT_EQ(runner("merge " + b_.string() + " --into " + all_.string()).code, 2);
  EXPECT_TRUE(fs::exists(all_));
  EXPECT_EQ(query(all_, "SELECT count(*) FROM runs"), 2);
}

TEST_F(MergeCliTest, UsageErrors) {
  write_shard(a_, {"t1"});
  Result r = runner("merge " + a_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "error: runner merge: missing --into OUT\n"
            "hint: usage: runner merge DB... --into OUT [options]\n");
  r = runner("merge --into " + all_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "error: runner merge: missing DB");
  const fs::path unwritable = dir_ / "no-such-dir" / "all.db";
  r = runner("merge " + a_.string() + " --into " + unwritable.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
            "error: cannot write database '" + unwritable.string() +
                "': No such file or directory");
  EXPECT_FALSE(fs::exists(dir_ / "no-such-dir"));
}

}  // namespace
