// The store, schema version 12: run labels (run_labels) written with a run's
// claim, read by get_run, labels_of_run(s) and runs_with_label, carried by
// merge, refused when they break the rules, and the migration of a
// version-11 file.
#include "store_fixture.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using namespace store_test;
using runner::Error;
using runner::Labels;

RunStart labelled(std::int64_t trial, std::int64_t repeat, Labels labels) {
  RunStart start;
  start.trial_id = trial;
  start.repeat_index = repeat;
  start.labels = std::move(labels);
  return start;
}

TEST_F(StoreTest, LabelsAreWrittenWithTheRunAndReadBack) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const auto first = store.claim_run(labelled(ids.trial, 0, {{"commit", "abc123"}, {"branch", "main"}}),
                                     "cfg1", [](const auto&) { return true; });
  ASSERT_TRUE(first.has_value());
  const std::int64_t second = store.begin_run(labelled(ids.trial, 1, {{"commit", "def456"}}));
  const std::int64_t bare = store.begin_run(labelled(ids.trial, 2, {}));

  const Labels want{{"branch", "main"}, {"commit", "abc123"}};
  EXPECT_EQ(store.labels_of_run(*first), want);
  EXPECT_EQ(store.get_run(*first)->labels, want);
  EXPECT_EQ(store.labels_of_run(second), (Labels{{"commit", "def456"}}));
  EXPECT_TRUE(store.labels_of_run(bare).empty());
  EXPECT_TRUE(store.get_run(bare)->labels.empty());
  EXPECT_TRUE(store.labels_of_run(999).empty());

  const auto all = store.labels_of_runs();
  ASSERT_EQ(all.size(), 2U);  // runs without labels are not listed
  EXPECT_EQ(all.at(*first), want);
  EXPECT_EQ(all.at(second), (Labels{{"commit", "def456"}}));

  EXPECT_EQ(store.runs_with_label("commit", "abc123"), std::vector<std::int64_t>{*first});
  EXPECT_EQ(store.runs_with_label("branch", "main"), std::vector<std::int64_t>{*first});
  EXPECT_TRUE(store.runs_with_label("commit", "abc").empty());  // whole values only
  EXPECT_TRUE(store.runs_with_label("build", "main").empty());

  sqlite3* db = handle(store);
  EXPECT_EQ(query_text(db, "SELECT group_concat(name || '=' || value, ' ') FROM "
                           "(SELECT * FROM run_labels ORDER BY run_id, name)"),
            "branch=main commit=abc123 commit=def456");
  // A label belongs to its run: deleting the run deletes it.
  ASSERT_EQ(sqlite3_exec(db, ("DELETE FROM runs WHERE id = " + std::to_string(*first)).c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_labels"), 1);
}

TEST_F(StoreTest, BadLabelsAreRefusedAndNothingIsWritten) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  EXPECT_THROW_MSG(static_cast<void>(store.begin_run(labelled(ids.trial, 0, {{"bad key", "x"}}))),
                   Error,
                   "cannot record a run: label key 'bad key' may hold only letters, digits, '_', "
                   "'-' and '.'");
  EXPECT_THROW_MSG(static_cast<void>(store.claim_run(labelled(ids.trial, 0, {{"commit", "a\nb"}}),
                                                     "cfg1", [](const auto&) { return true; })),
                   Error,
                   "cannot record a run: label 'commit': the value must be printable text (no "
                   "control characters, UTF-8)");
  EXPECT_THROW_MSG(static_cast<void>(store.begin_run(labelled(ids.trial, 0, {{"commit", ""}}))), Error,
                   "cannot record a run: label 'commit': the value must not be empty");
  sqlite3* db = handle(store);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM runs"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_labels"), 0);
  // The table refuses an empty name from any client.
  EXPECT_NE(sqlite3_exec(db, "INSERT INTO run_labels VALUES (1, '', 'x')", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
}

TEST_F(StoreTest, MergeCarriesLabelsOnceEvenWhenMergedTwice) {
  const fs::path shard = dir_ / "shard.db";
  std::int64_t run = 0;
  {
    Store store = Store::open(shard);
    const Ids ids = add_trial(store);
    run = store.begin_run(labelled(ids.trial, 0, {{"commit", "abc123"}, {"build", "42"}}));
    store.finish_run(run, RunStatus::finished, "", {}, {});
    const std::int64_t other = store.begin_run(labelled(ids.trial, 1, {{"commit", "def456"}}));
    store.finish_run(other, RunStatus::finished, "", {}, {});
  }
  Store all = Store::open(db_path_);
  const auto counts = all.merge_from(shard);
  EXPECT_EQ(counts.run_labels.added, 3);
  EXPECT_EQ(counts.run_labels.present, 0);
  const auto ids = all.runs_with_label("commit", "abc123");
  ASSERT_EQ(ids.size(), 1U);
  EXPECT_EQ(all.labels_of_run(ids[0]), (Labels{{"build", "42"}, {"commit", "abc123"}}));
  EXPECT_EQ(all.get_run(ids[0])->uuid, Store::open_read_only(shard).get_run(run)->uuid);

  const auto again = all.merge_from(shard);
  EXPECT_EQ(again.run_labels.added, 0);
  EXPECT_EQ(again.run_labels.present, 3);
  EXPECT_EQ(query_int(handle(all), "SELECT count(*) FROM run_labels"), 3);
}

/// runner_sha256() for raw connections: the version-2 step names it.
void sql_sha256(sqlite3_context* context, int /*argc*/, sqlite3_value** argv) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string hex = runner::sha256_hex(text != nullptr ? text : "");
  sqlite3_result_text(context, hex.c_str(), -1, SQLITE_TRANSIENT);
}

/// Writes a version-11 file as runner at schema 11 left it: every released
/// step up to 11 applied in order, then one finished run.
void write_v11_file(const fs::path& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_create_function(db, "runner_sha256", 1, SQLITE_UTF8, nullptr, &sql_sha256,
                                    nullptr, nullptr),
            SQLITE_OK);
  std::string sql = "BEGIN;";
  for (int version = 1; version <= 11; ++version)
    sql += std::string(runner::store::testing::migration_sql(version)) + "PRAGMA user_version = " +
           std::to_string(version) + ";";
  sql +=
      "INSERT INTO experiments (id, name, source_path, source_text, source_sha256) "
      "  VALUES (1, 'amp', '/exp/amp.toml', 'text', 'sha-text');"
      "INSERT INTO trials (id, experiment_id, config_json, config_hash, identity, label) "
      "  VALUES (1, 1, '{\"lr\":1}', 'cfg1', 'cfg1', 'lr=1');"
      "INSERT INTO runs (id, trial_id, repeat_index, kind, status, seed, started_at, "
      "  finished_at, heartbeat_at, uuid) VALUES (1, 1, 0, 'train', 'finished', 7, "
      "  '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', '2026-01-01T00:00:01.000Z', "
      "  '0123456789abcdef0123456789abcdef');"
      "COMMIT;";
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

TEST_F(StoreTest, AVersion11FileMigratesAndItsNewRunsCarryLabels) {
  write_v11_file(db_path_);
  {
    // Read-only: a migrated copy, the file untouched.
    const Store reader = Store::open_read_only(db_path_);
    EXPECT_TRUE(reader.get_run(1)->labels.empty());
  }
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db_path_.c_str(), &raw), SQLITE_OK);
    EXPECT_EQ(query_int(raw, "PRAGMA user_version"), 11);
    sqlite3_close(raw);
  }
  Store store = Store::open(db_path_);
  sqlite3* db = handle(store);
  EXPECT_EQ(store.schema_version(), 12);
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");
  const auto old = store.get_run(1);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->uuid, "0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(old->labels.empty());
  const std::int64_t run = store.begin_run(labelled(1, 1, {{"commit", "abc123"}}));
  EXPECT_EQ(store.labels_of_run(run), (Labels{{"commit", "abc123"}}));
  EXPECT_EQ(store.runs_with_label("commit", "abc123"), std::vector<std::int64_t>{run});
}

}  // namespace
