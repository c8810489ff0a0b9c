// The store, schema version 5: held-out evaluations and the weights files of
// a run (written by finish_run, read by get_run, copied by merge), and the
// migration of a version-4 file. Values are doubles stored as SQLite REAL
// (8-byte IEEE), so they compare exactly; no float32 is involved.
#include "store_fixture.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using namespace store_test;
using runner::Error;
using runner::store::Evaluation;
using runner::store::RunFile;

const std::string kShaA = runner::sha256_hex("weights a");
const std::string kShaB = runner::sha256_hex("weights b");

std::vector<Evaluation> curve() {
  // Deliberately not in (step, metric) order: get_run() sorts.
  return {{100, "loss", 1.25},
          {50, "loss", 2.5},
          {50, "accuracy", 0.375},
          {100, "accuracy", 0.625},
          {50, "perplexity", kNaN}};
}

std::vector<RunFile> weights() {
  return {{"save_to", "/w/out.safetensors", kShaB, 2048, ""},
          {"init_from", "/w/in.safetensors", kShaA, 1024,
           "missing fc.bias\nunexpected head.weight"}};
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// runner_sha256() for raw connections: the version-2 step names it.
void sql_sha256(sqlite3_context* context, int /*argc*/, sqlite3_value** argv) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string hex = runner::sha256_hex(text != nullptr ? text : "");
  sqlite3_result_text(context, hex.c_str(), -1, SQLITE_TRANSIENT);
}

/// Writes a version-4 file as runner at schema 4 left it: every released
/// step applied in order, then one finished run with a sample, a summary and
/// a metric written with version-4 columns (claim, host, boot_id, pid_start).
void write_v4_file(const fs::path& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_create_function(db, "runner_sha256", 1, SQLITE_UTF8, nullptr, &sql_sha256,
                                    nullptr, nullptr),
            SQLITE_OK);
  std::string sql = "BEGIN;";  // one transaction: one sync instead of one per statement
  for (int version = 1; version <= 4; ++version)
    sql += std::string(runner::store::testing::migration_sql(version)) + "PRAGMA user_version = " +
           std::to_string(version) + ";";
  sql +=
      "INSERT INTO experiments (id, name, source_path, source_text, source_sha256) "
      "  VALUES (1, 'amp', '/exp/amp.toml', 'text', 'sha-text');"
      "INSERT INTO trials (id, experiment_id, config_json, config_hash, identity, label) "
      "  VALUES (1, 1, '{\"lr\":1}', 'cfg1', 'id1', 'lr=1');"
      "INSERT INTO fingerprints (id, hash, json) VALUES (1, 'fp1', '{}');"
      "INSERT INTO runs (id, trial_id, fingerprint_id, repeat_index, kind, status, seed, "
      "  started_at, finished_at, heartbeat_at, pid, uuid, claim, host, boot_id, pid_start) "
      "  VALUES (1, 1, 1, 0, 'train', 'finished', 7, '2025-01-01T00:00:00.000Z', "
      "  '2025-01-01T00:00:01.000Z', '2025-01-01T00:00:01.000Z', 99, "
      "  '0123456789abcdef0123456789abcdef', NULL, 'box', 'boot', 5);"
      "INSERT INTO samples (run_id, step, warmup, wall_ns, h2d_ns) VALUES (1, 0, 0, 100, 3);"
      "INSERT INTO summaries (run_id, metric, unit, n, p50, cv) "
      "  VALUES (1, 'step_time', 'ns', 1, 100, 0);"
      "INSERT INTO metrics (run_id, name, value, unit) VALUES (1, 'final_loss', 0.5, '');"
      "COMMIT;";
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message != nullptr ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

// --- write and read ---------------------------------------------------------

TEST_F(StoreTest, EvaluationsAndFilesRoundTrip) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  store.finish_run(run, RunStatus::finished, "", {summary("step_time", 85)},
                   {{"final_loss", 1.25, ""}}, 0, curve(), weights());

  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  // By step, then metric.
  const std::vector<std::pair<std::int64_t, std::string>> order = {
      {50, "accuracy"}, {50, "loss"}, {50, "perplexity"}, {100, "accuracy"}, {100, "loss"}};
  ASSERT_EQ(detail->evaluations.size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(detail->evaluations[i].step, order[i].first) << i;
    EXPECT_EQ(detail->evaluations[i].metric, order[i].second) << i;
  }
  EXPECT_EQ(detail->evaluations[0].value, 0.375);
  EXPECT_EQ(detail->evaluations[1].value, 2.5);
  EXPECT_TRUE(std::isnan(detail->evaluations[2].value));
  EXPECT_EQ(detail->evaluations[3].value, 0.625);
  EXPECT_EQ(detail->evaluations[4].value, 1.25);
  // NaN is NULL in the file, the one spelling of "no value".
  sqlite3* db = handle(store);
  EXPECT_EQ(query_text(db, "SELECT metric FROM evaluations WHERE value IS NULL"), "perplexity");

  // By role.
  ASSERT_EQ(detail->files.size(), 2U);
  EXPECT_EQ(detail->files[0].role, "init_from");
  EXPECT_EQ(detail->files[0].path, "/w/in.safetensors");
  EXPECT_EQ(detail->files[0].sha256, kShaA);
  EXPECT_EQ(detail->files[0].bytes, 1024);
  EXPECT_EQ(detail->files[0].skipped, "missing fc.bias\nunexpected head.weight");
  EXPECT_EQ(detail->files[1].skipped, "");
  EXPECT_EQ(detail->files[1].role, "save_to");
  EXPECT_EQ(detail->files[1].path, "/w/out.safetensors");
  EXPECT_EQ(detail->files[1].sha256, kShaB);
  EXPECT_EQ(detail->files[1].bytes, 2048);

  // The rest of the verdict is written as before.
  EXPECT_EQ(detail->row.status, RunStatus::finished);
  ASSERT_EQ(detail->metrics.size(), 1U);
  EXPECT_EQ(detail->summaries.size(), 1U);

  // A run without either reads back empty ones.
  const std::int64_t bare = begin(store, ids, RunKind::train, 1);
  store.finish_run(bare, RunStatus::finished, "", {}, {});
  EXPECT_TRUE(store.get_run(bare)->evaluations.empty());
  EXPECT_TRUE(store.get_run(bare)->files.empty());
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");
}

TEST_F(StoreTest, RunEvaluationsViewNamesTheRun) {
  Store store = Store::open(db_path_);
  const std::int64_t experiment = store.upsert_experiment("lm", "/exp/lm.toml", "text");
  const std::int64_t trial = store.upsert_trial(experiment, "{}", "cfg", "id-lm", "lr=0.1");
  RunStart start;
  start.trial_id = trial;
  start.repeat_index = 2;
  const std::int64_t run = store.begin_run(start);
  store.finish_run(run, RunStatus::diverged, "loss is NaN", {}, {}, 0, curve());
  sqlite3* db = handle(store);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_evaluations"), 5);
  EXPECT_EQ(query_text(db,
                       "SELECT run_id || '|' || experiment || '|' || label || '|' || identity || "
                       "'|' || repeat_index || '|' || kind || '|' || status || '|' || "
                       "stored_status || '|' || step || '|' || value FROM run_evaluations "
                       "WHERE metric = 'loss' ORDER BY step LIMIT 1"),
            std::to_string(run) + "|lm|lr=0.1|id-lm|2|train|diverged|diverged|50|2.5");
  EXPECT_EQ(query_text(db, "SELECT value FROM run_evaluations WHERE metric = 'perplexity'"),
            "<null>");
}

TEST_F(StoreTest, ARepeatedEvaluationIsRefusedAndNothingIsWritten) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": ";
  std::vector<Evaluation> twice = curve();
  twice.push_back({100, "loss", 1.5});
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {summary("step_time", 1)},
                                    {{"samples_per_s", 1, "1/s"}}, 0, twice, weights()),
                   Error,
                   prefix + "evaluation 'loss' at step 100 is given twice (each metric is "
                            "recorded once per evaluation step)");
  sqlite3* db = handle(store);
  EXPECT_EQ(query_text(db, "SELECT status FROM runs WHERE id = " + std::to_string(run)),
            "running");
  for (const char* table : {"summaries", "metrics", "evaluations", "run_files"})
    EXPECT_EQ(query_int(db, std::string("SELECT count(*) FROM ") + table), 0) << table;
  // The run can still be finished properly.
  store.finish_run(run, RunStatus::finished, "", {}, {}, 0, curve(), weights());
  EXPECT_EQ(store.get_run(run)->evaluations.size(), 5U);
}

TEST_F(StoreTest, InvalidEvaluationsAndFilesAreRefusedWithTheirReason) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": ";
  const RunFile good = {"init_from", "/w/in.safetensors", kShaA, 1024, ""};
  const std::string upper_sha = "A" + kShaA.substr(1);
  auto with = [](RunFile f, auto change) {
    change(f);
    return f;
  };
  const std::vector<std::pair<std::vector<Evaluation>, std::string>> evaluations = {
      {{{10, "", 1.0}}, "evaluation at step 10 has no metric name"},
      {{{-1, "loss", 1.0}}, "evaluation 'loss' at step -1: invalid step (expected 0 or more)"},
  };
  for (const auto& [given, reason] : evaluations)
    EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 0, given), Error,
                     prefix + reason);
  const std::vector<std::pair<std::vector<RunFile>, std::string>> files = {
      {{good, with(good, [](RunFile& f) { f.path = "/w/other.safetensors"; })},
       "weights file role 'init_from' is given twice ('/w/in.safetensors', then "
       "'/w/other.safetensors'; a run has one file per role)"},
      {{with(good, [](RunFile& f) { f.role = ""; })},
       "weights file '/w/in.safetensors' has no role"},
      {{with(good, [](RunFile& f) { f.path = "w/in.safetensors"; })},
       "weights file 'w/in.safetensors' (init_from): expected an absolute path"},
      {{with(good, [](RunFile& f) { f.sha256 = "ABC"; })},
       "weights file '/w/in.safetensors' (init_from): invalid sha256 'ABC' (expected 64 "
       "lowercase hex digits)"},
      {{with(good, [](RunFile& f) { f.sha256[0] = 'A'; })},
       "weights file '/w/in.safetensors' (init_from): invalid sha256 '" + upper_sha +
           "' (expected 64 lowercase hex digits)"},
      {{with(good, [](RunFile& f) { f.bytes = -1; })},
       "weights file '/w/in.safetensors' (init_from): invalid size -1 (expected 0 or more bytes)"},
  };
  for (const auto& [given, reason] : files)
    EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, given), Error,
                     prefix + reason);
  EXPECT_EQ(store.get_run(run)->row.stored_status, RunStatus::running);
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM run_files"), 0);
}

TEST_F(StoreTest, AFailedFileInsertRollsBackTheEvaluationsAndTheVerdict) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  sqlite3* db = handle(store);
  // The last insert of finish_run fails (as a full disk would).
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TEMP TRIGGER refuse BEFORE INSERT ON run_files "
                         "BEGIN SELECT RAISE(ABORT, 'no room'); END",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 0, curve(), weights()),
                   Error, "cannot finish run " + std::to_string(run) + ": no room");
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM evaluations"), 0);
  EXPECT_EQ(query_text(db, "SELECT status FROM runs WHERE id = " + std::to_string(run)),
            "running");
}

TEST_F(StoreTest, TheSchemaRefusesWhatTheApiRefusesAndCascades) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  store.finish_run(run, RunStatus::finished, "", {}, {}, 0, curve(), weights());
  sqlite3* db = handle(store);
  const std::string id = std::to_string(run);
  // Another client writing directly meets the same rules.
  for (const std::string& sql : {
           "INSERT INTO evaluations VALUES (" + id + ", 50, 'loss', 3)",  // repeated
           "INSERT INTO evaluations VALUES (" + id + ", -1, 'loss', 3)",
           "INSERT INTO evaluations VALUES (" + id + ", 7, '', 3)",
           "INSERT INTO evaluations VALUES (" + id + " + 1000, 7, 'loss', 3)",  // no such run
           "INSERT INTO run_files VALUES (" + id + ", 'init_from', '/x', '" + kShaA + "', 1)",
           "INSERT INTO run_files VALUES (" + id + ", 'extra', '/x', '" + kShaA + "', -1)",
           "INSERT INTO run_files VALUES (" + id + ", 'extra', '/x', 'A" + kShaA.substr(1) +
               "', 1)",
           "INSERT INTO run_files VALUES (" + id + ", 'extra', '/x', 'abc', 1)",
       })
    EXPECT_NE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM evaluations"), 5);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_files"), 2);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM runs", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM evaluations"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_files"), 0);
}

// --- migration from version 4 -----------------------------------------------

TEST_F(StoreTest, MigratesAVersion4FileKeepingItsData) {
  write_v4_file(db_path_);
  Store store = Store::open(db_path_);
  sqlite3* db = handle(store);
  EXPECT_EQ(store.schema_version(), runner::store::kSchemaVersion);
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");
  const auto old = store.get_run(1);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->uuid, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(old->row.label, "lr=1");
  EXPECT_EQ(old->sample_count, 1);
  ASSERT_EQ(old->metrics.size(), 1U);
  EXPECT_EQ(old->metrics[0].value, 0.5);
  EXPECT_TRUE(old->evaluations.empty());
  EXPECT_TRUE(old->files.empty());
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_evaluations"), 0);

  // New runs in the migrated file record both.
  RunStart start;
  start.trial_id = 1;
  start.repeat_index = 1;
  const std::int64_t run = store.begin_run(start);
  store.finish_run(run, RunStatus::finished, "", {}, {}, 0, curve(), weights());
  EXPECT_EQ(store.get_run(run)->evaluations.size(), 5U);
  EXPECT_EQ(store.get_run(run)->files.size(), 2U);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_evaluations WHERE experiment = 'amp'"), 5);
}

TEST_F(StoreTest, OpenReadOnlyReadsAVersion4FileWithoutChangingIt) {
  write_v4_file(db_path_);
  const std::string before = bytes_of(db_path_);
  {
    const Store reader = Store::open_read_only(db_path_);
    EXPECT_EQ(reader.schema_version(), runner::store::kSchemaVersion);  // of the migrated copy
    const auto old = reader.get_run(1);
    ASSERT_TRUE(old.has_value());
    EXPECT_TRUE(old->evaluations.empty());
    EXPECT_TRUE(old->files.empty());
  }
  EXPECT_EQ(bytes_of(db_path_), before);
}

// --- merge ------------------------------------------------------------------

/// A shard with one finished run per identity, each with the curve and the weights.
void write_shard(const fs::path& path, const std::vector<std::string>& identities) {
  Store store = Store::open(path);
  const std::int64_t e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
  for (const auto& identity : identities) {
    RunStart start;
    start.trial_id = store.upsert_trial(e, "{\"t\":\"" + identity + "\"}", "h-" + identity,
                                        identity, "t=" + identity);
    const std::int64_t run = store.begin_run(start);
    store.finish_run(run, RunStatus::finished, "", {}, {}, 0, curve(), weights());
  }
}

TEST_F(StoreTest, MergeCopiesEvaluationsAndFilesAndCountsThem) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  const fs::path old = dir_ / "v4.db";
  write_shard(a, {"t1", "t2"});
  write_shard(b, {"t3"});
  write_v4_file(old);

  Store all = Store::open(db_path_);
  const auto first = all.merge_from(std::vector<fs::path>{a, b, old});
  ASSERT_EQ(first.size(), 3U);
  EXPECT_EQ(first[0].evaluations.added, 10);
  EXPECT_EQ(first[0].run_files.added, 4);
  EXPECT_EQ(first[1].evaluations.added, 5);
  EXPECT_EQ(first[1].run_files.added, 2);
  EXPECT_EQ(first[2].evaluations.added, 0);  // a version-4 input has none
  EXPECT_EQ(first[2].runs.added, 1);
  for (const auto& c : first) {
    EXPECT_EQ(c.evaluations.present, 0);
    EXPECT_EQ(c.run_files.present, 0);
  }
  sqlite3* db = handle(all);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM evaluations"), 15);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM evaluations WHERE value IS NULL"), 3);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_files"), 6);
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");
  // Copied rows belong to the copied runs, with their values.
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM run_evaluations WHERE label = 't=t3' AND step = 100 "
                      "AND metric = 'accuracy' AND value = 0.625"),
            1);
  EXPECT_EQ(query_text(db,
                       "SELECT f.sha256 || ' ' || f.bytes FROM run_files AS f JOIN runs AS r ON "
                       "r.id = f.run_id JOIN trials AS t ON t.id = r.trial_id "
                       "WHERE t.identity = 't2' AND f.role = 'save_to'"),
            kShaB + " 2048");

  // Again: every row is already there, counted as present.
  const auto second = all.merge_from(std::vector<fs::path>{a, b});
  EXPECT_EQ(second[0].evaluations.added, 0);
  EXPECT_EQ(second[0].evaluations.present, 10);
  EXPECT_EQ(second[0].run_files.present, 4);
  EXPECT_EQ(second[1].evaluations.present, 5);
  EXPECT_EQ(second[1].run_files.present, 2);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM evaluations"), 15);

  runner::store::MergeCounts total;
  for (const auto& c : second) total += c;
  EXPECT_EQ(total.evaluations.present, 15);
  EXPECT_EQ(total.run_files.present, 6);
}

}  // namespace

// --- version 6: what the training recipe did at each step ----------------------

TEST_F(StoreTest, RecipeColumnsOfSamplesRoundTripMigrateAndMerge) {
  const fs::path shard = dir_ / "shard.db";
  {
    Store store = Store::open(shard);
    const std::int64_t e = store.upsert_experiment("amp", "/exp/amp.toml", "[experiment]\n");
    RunStart start;
    start.trial_id = store.upsert_trial(e, "{\"p\":\"amp_fp16\"}", "h-amp", "id-amp", "");
    const std::int64_t run = store.begin_run(start);
    Sample clean;
    clean.step = 0;
    clean.lr = 0.01;
    clean.grad_norm = 3.5;
    clean.loss_scale = 65536;
    clean.skipped = 0;
    Sample overflow = clean;
    overflow.step = 1;
    overflow.grad_norm = std::numeric_limits<double>::infinity();
    overflow.skipped = 1;
    Sample plain;  // a run without a recipe: every recipe column NULL
    plain.step = 2;
    store.add_samples(run, {clean, overflow, plain});
    store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, {});
    const std::vector<Sample> back = store.samples(run);
    ASSERT_EQ(back.size(), 3U);
    EXPECT_EQ(back[0].lr, 0.01);
    EXPECT_EQ(back[0].grad_norm, 3.5);
    EXPECT_EQ(back[0].loss_scale, 65536);
    EXPECT_EQ(back[0].skipped, 0);
    EXPECT_EQ(back[1].skipped, 1);
    EXPECT_TRUE(std::isinf(back[1].grad_norm));
    EXPECT_TRUE(std::isnan(back[2].lr));
    EXPECT_TRUE(std::isnan(back[2].grad_norm));
    EXPECT_TRUE(std::isnan(back[2].loss_scale));
    EXPECT_EQ(back[2].skipped, -1);
    // The schema admits only 0 and 1 (and NULL) as skipped.
    EXPECT_NE(sqlite3_exec(handle(store),
                           "UPDATE samples SET skipped = 2 WHERE step = 0", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
  }
  // A version-4 file migrates: its old samples have NULL there.
  write_v4_file(db_path_);
  Store all = Store::open(db_path_);
  const std::vector<Sample> old = all.samples(1);
  ASSERT_EQ(old.size(), 1U);
  EXPECT_TRUE(std::isnan(old[0].lr));
  EXPECT_EQ(old[0].skipped, -1);
  // Merging copies the columns.
  all.merge_from(std::vector<fs::path>{shard});
  sqlite3* db = handle(all);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM samples WHERE skipped = 1 AND loss_scale = 65536"),
            1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM samples WHERE lr = 0.01"), 2);
}

// --- version 7: attributes of a run -------------------------------------------

TEST_F(StoreTest, AttributesRoundTripAreCheckedAndMerge) {
  using runner::store::RunAttribute;
  const fs::path shard = dir_ / "attributes.db";
  {
    Store store = Store::open(shard);
    const Ids ids = add_trial(store);
    const std::int64_t run = begin(store, ids);
    // Not in name order: get_run() sorts.
    store.finish_run(run, RunStatus::finished, "", {}, {}, 0, {}, {},
                     {{"model.torch_version", "2.14.1+cu130"}, {"model.dynamic_dims", ""},
                      {"model.format", "aoti"}});
    const auto detail = store.get_run(run);
    ASSERT_TRUE(detail.has_value());
    ASSERT_EQ(detail->attributes.size(), 3U);
    EXPECT_EQ(detail->attributes[0].name, "model.dynamic_dims");
    EXPECT_EQ(detail->attributes[0].value, "");
    EXPECT_EQ(detail->attributes[1].name, "model.format");
    EXPECT_EQ(detail->attributes[1].value, "aoti");
    EXPECT_EQ(detail->attributes[2].name, "model.torch_version");
    EXPECT_EQ(detail->attributes[2].value, "2.14.1+cu130");

    // Two with one name, or an empty name: refused, nothing of the verdict written.
    const std::int64_t twice = begin(store, ids, RunKind::train, 1);
    EXPECT_THROW_MSG(store.finish_run(twice, RunStatus::finished, "", {}, {}, 0, {}, {},
                                      {{"model.format", "aoti"}, {"model.format", "torchscript"}}),
                     Error,
                     "cannot finish run " + std::to_string(twice) +
                         ": two attributes named 'model.format'");
    EXPECT_THROW_MSG(store.finish_run(twice, RunStatus::finished, "", {}, {}, 0, {}, {},
                                      {RunAttribute{"", "x"}}),
                     Error,
                     "cannot finish run " + std::to_string(twice) +
                         ": an attribute has an empty name");
    EXPECT_EQ(store.get_run(twice)->row.stored_status, RunStatus::running);
    EXPECT_TRUE(store.get_run(twice)->attributes.empty());
  }
  Store all = Store::open(db_path_);
  const auto counts = all.merge_from(shard);
  EXPECT_EQ(counts.run_attributes.added, 3);
  EXPECT_EQ(query_text(handle(all), "SELECT value FROM run_attributes WHERE name = 'model.format'"),
            "aoti");
  EXPECT_EQ(all.merge_from(shard).run_attributes.present, 3);
}
