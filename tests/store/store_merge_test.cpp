// The store: merging databases (store/src/merge.cpp).
#include "store_fixture.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using namespace store_test;
using runner::Error;
using runner::ErrorKind;

// --- merge ------------------------------------------------------------------

/// A shard database as `runner run --shard K/N` writes it: one experiment
/// (the same text in every shard), the given trials, one fingerprint shared
/// by all shards and one of its own, `repeats` finished runs per trial.
struct Shard {
  std::vector<std::string> trials;  // identities; config is derived from them
  std::string own_fingerprint;
  int repeats = 2;
  int steps = 5;
};

void write_shard(const fs::path& path, const Shard& shard) {
  Store store = Store::open(path);
  const std::int64_t e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
  const std::int64_t shared = store.upsert_fingerprint("fp-shared", R"({"host":"a"})");
  const std::int64_t own = store.upsert_fingerprint(shard.own_fingerprint, R"({"host":"b"})");
  for (const auto& identity : shard.trials) {
    const std::int64_t trial =
        store.upsert_trial(e, R"({"t":")" + identity + R"("})", "h-" + identity, identity,
                           "t=" + identity);
    for (int repeat = 0; repeat < shard.repeats; ++repeat) {
      RunStart start;
      start.trial_id = trial;
      start.fingerprint_id = repeat % 2 == 0 ? shared : own;
      start.repeat_index = repeat;
      start.kind = RunKind::train;
      start.seed = repeat;
      const std::int64_t run = store.begin_run(start);
      store.add_plugins(run, {{"model", "mlp", "/lib/libmlp.so", "1", "aa"}});
      std::vector<Sample> samples(static_cast<std::size_t>(shard.steps));
      for (int step = 0; step < shard.steps; ++step)
        samples[static_cast<std::size_t>(step)] =
            make_sample(step, step == 0, 100.0 + step, -1, 40, 30, 20, 1.0 / (step + 1));
      store.add_samples(run, samples);
      Summary s;
      s.metric = "step_time";
      s.unit = "ns";
      s.n = shard.steps - 1;
      s.p50 = 102;
      store.finish_run(run, RunStatus::finished, "", {s}, {{"samples_per_s", 10.0 + repeat, "1/s"}});
    }
  }
}

std::int64_t count(const Store& store, const std::string& table) {
  return query_int(handle(store), "SELECT count(*) FROM " + table);
}

TEST_F(StoreTest, MergeJoinsShardsWithoutDuplicates) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  write_shard(a, {{"t1", "t2"}, "fp-a"});
  write_shard(b, {{"t2", "t3"}, "fp-b"});  // t2 overlaps (e.g. a rerun on another shard)

  Store all = Store::open(db_path_);
  const auto first = all.merge_from(a);
  EXPECT_EQ(first.experiments.added, 1);
  EXPECT_EQ(first.trials.added, 2);
  EXPECT_EQ(first.fingerprints.added, 2);
  EXPECT_EQ(first.runs.added, 4);
  EXPECT_EQ(first.run_plugins.added, 4);
  EXPECT_EQ(first.samples.added, 20);
  EXPECT_EQ(first.summaries.added, 4);
  EXPECT_EQ(first.metrics.added, 4);
  EXPECT_EQ(first.runs.present, 0);

  const auto second = all.merge_from(b);
  EXPECT_EQ(second.experiments.added, 0);
  EXPECT_EQ(second.experiments.present, 1);
  EXPECT_EQ(second.trials.added, 1);
  EXPECT_EQ(second.trials.present, 1);
  EXPECT_EQ(second.fingerprints.added, 1);
  EXPECT_EQ(second.fingerprints.present, 1);
  EXPECT_EQ(second.runs.added, 4);  // runs of t2 in b are other runs than those in a
  EXPECT_EQ(second.samples.added, 20);

  EXPECT_EQ(count(all, "experiments"), 1);
  EXPECT_EQ(count(all, "trials"), 3);
  EXPECT_EQ(count(all, "fingerprints"), 3);
  EXPECT_EQ(count(all, "runs"), 8);
  EXPECT_EQ(count(all, "run_plugins"), 8);
  EXPECT_EQ(count(all, "samples"), 40);
  EXPECT_EQ(count(all, "summaries"), 8);
  EXPECT_EQ(count(all, "metrics"), 8);
  EXPECT_EQ(count(all, "run_overview WHERE status = 'finished'"), 8);
  EXPECT_EQ(count(all, "runs WHERE trial_id = (SELECT id FROM trials WHERE identity = 't2')"), 4);
  sqlite3* db = handle(all);
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(db, "PRAGMA foreign_key_check"), "");

  // Every run arrived whole: its samples, uuid, timestamps and references.
  for (const fs::path& shard : {a, b}) {
    const Store in = Store::open_read_only(shard);
    for (const auto& row : in.list_runs()) {
      const auto original = in.get_run(row.id);
      const std::string uuid = original->uuid;
      const std::int64_t id = query_int(db, "SELECT id FROM runs WHERE uuid = '" + uuid + "'");
      const auto copy = all.get_run(id);
      ASSERT_TRUE(copy.has_value()) << uuid;
      EXPECT_EQ(copy->row.started_at, original->row.started_at);
      EXPECT_EQ(copy->row.finished_at, original->row.finished_at);
      EXPECT_EQ(copy->identity, original->identity);
      EXPECT_EQ(copy->row.label, original->row.label);
      EXPECT_EQ(copy->config_json, original->config_json);
      EXPECT_EQ(copy->fingerprint_hash, original->fingerprint_hash);
      EXPECT_EQ(copy->pid, original->pid);
      EXPECT_EQ(copy->sample_count, original->sample_count);
      ASSERT_EQ(copy->metrics.size(), 1U);
      EXPECT_DOUBLE_EQ(copy->metrics[0].value, original->metrics[0].value);
      const auto samples_in = in.samples(row.id);
      const auto samples_out = all.samples(id);
      ASSERT_EQ(samples_out.size(), samples_in.size());
      for (std::size_t i = 0; i < samples_in.size(); ++i) {
        EXPECT_EQ(samples_out[i].warmup, samples_in[i].warmup);
        EXPECT_DOUBLE_EQ(samples_out[i].wall_ns, samples_in[i].wall_ns);
        EXPECT_DOUBLE_EQ(samples_out[i].phase(Phase::data), -1);  // NULL stays NULL
        EXPECT_DOUBLE_EQ(samples_out[i].loss, samples_in[i].loss);
      }
    }
  }
}

TEST_F(StoreTest, MergingTheSameShardTwiceAddsNothing) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1", "t2"}, "fp-a"});
  Store all = Store::open(db_path_);
  all.merge_from(a);
  const auto again = all.merge_from(std::vector<fs::path>{a, a});
  ASSERT_EQ(again.size(), 2U);
  for (const auto& counts : again) {
    for (const auto* table : {&counts.experiments, &counts.trials, &counts.fingerprints,
                              &counts.runs, &counts.run_plugins, &counts.samples,
                              &counts.summaries, &counts.metrics})
      EXPECT_EQ(table->added, 0);
    EXPECT_EQ(counts.experiments.present, 1);
    EXPECT_EQ(counts.trials.present, 2);
    EXPECT_EQ(counts.fingerprints.present, 2);
    EXPECT_EQ(counts.runs.present, 4);
    EXPECT_EQ(counts.samples.present, 20);
    EXPECT_EQ(counts.metrics.present, 4);
  }
  EXPECT_EQ(count(all, "runs"), 4);
  EXPECT_EQ(count(all, "samples"), 20);
  // Merging the merged file back into a shard adds only what the shard lacks.
  all = Store::open(db_path_);
  {
    Store shard = Store::open(a);
    const auto back = shard.merge_from(db_path_);
    EXPECT_EQ(back.runs.added, 0);
    EXPECT_EQ(back.runs.present, 4);
  }
  EXPECT_EQ(query_text(handle(all), "PRAGMA integrity_check"), "ok");
}

// A profiled run: its operators (run_ops), its trace (run_files role
// profile_trace) and its profiled samples travel with it, once.
TEST_F(StoreTest, MergeCarriesTheOperatorsAndTraceOfAProfiledRun) {
  const fs::path a = dir_ / "a.db";
  const std::string sha(64, 'a');
  {
    Store shard = Store::open(a);
    const auto e = shard.upsert_experiment("p", "/p.toml", "[profile]\nsteps = 2\n");
    const auto trial = shard.upsert_trial(e, "{}", "hp", "hp", "");
    RunStart start;
    start.trial_id = trial;
    const auto run = shard.begin_run(start);
    std::vector<Sample> samples(3);
    for (int i = 0; i < 3; ++i) {
      samples[static_cast<std::size_t>(i)].step = i;
      samples[static_cast<std::size_t>(i)].wall_ns = 10;
      samples[static_cast<std::size_t>(i)].profiled = i < 2;
    }
    shard.add_samples(run, samples);
    shard.finish_run(run, RunStatus::finished, "", {}, {}, 0, {},
                     {{"profile_trace", "/traces/run-1.json", sha, 1234, ""}}, {},
                     {{"aten::mm", "", 4, 100, 120, 0, 0}, {"aten::relu", "[[8, 4]]", 2, 7, 7, 0, 0}});
  }
  Store all = Store::open(db_path_);
  const auto first = all.merge_from(a);
  EXPECT_EQ(first.run_ops.added, 2);
  EXPECT_EQ(first.run_files.added, 1);
  const auto again = all.merge_from(a);
  EXPECT_EQ(again.run_ops.added, 0);
  EXPECT_EQ(again.run_ops.present, 2);
  const std::int64_t run = query_int(handle(all), "SELECT id FROM runs");
  const auto ops = all.run_ops(run);
  ASSERT_EQ(ops.size(), 2U);
  EXPECT_EQ(ops[0].name, "aten::mm");
  EXPECT_EQ(ops[0].calls, 4);
  EXPECT_EQ(ops[0].total_cpu_ns, 120);
  EXPECT_EQ(ops[1].input_shapes, "[[8, 4]]");
  const auto detail = all.get_run(run);
  ASSERT_EQ(detail->files.size(), 1U);
  EXPECT_EQ(detail->files[0].role, "profile_trace");
  EXPECT_EQ(detail->files[0].path, "/traces/run-1.json");
  EXPECT_EQ(detail->files[0].bytes, 1234);
  EXPECT_EQ(query_int(handle(all), "SELECT count(*) FROM samples WHERE profiled = 1"), 2);
  EXPECT_EQ(query_text(handle(all), "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, MergeTotalsAddUp) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  write_shard(a, {{"t1"}, "fp-a"});
  write_shard(b, {{"t1", "t2"}, "fp-b"});
  Store all = Store::open(db_path_);
  runner::store::MergeCounts total;
  for (const auto& counts : all.merge_from(std::vector<fs::path>{a, b})) total += counts;
  EXPECT_EQ(total.experiments.added, 1);
  EXPECT_EQ(total.experiments.present, 1);
  EXPECT_EQ(total.trials.added, 2);
  EXPECT_EQ(total.trials.present, 1);
  EXPECT_EQ(total.runs.added, 6);
  EXPECT_EQ(total.samples.added, 30);
  EXPECT_EQ(total.runs_running, 0);
}

TEST_F(StoreTest, MergeIntoItselfIsRejected) {
  write_shard(db_path_, {{"t1"}, "fp-a"});
  Store store = Store::open(db_path_);
  const fs::path other_spelling = dir_ / "." / "runner.db";
  EXPECT_THROW_MSG(store.merge_from(other_spelling), Error,
                   "cannot merge database '" + other_spelling.string() + "' into itself");
  const fs::path link = dir_ / "link.db";
  fs::create_symlink(db_path_, link);
  EXPECT_THROW_MSG(store.merge_from(link), Error,
                   "cannot merge database '" + link.string() + "' into itself");
  EXPECT_EQ(count(store, "runs"), 2);
}

TEST_F(StoreTest, MergeWithABadInputWritesNothing) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1"}, "fp-a"});
  const fs::path missing = dir_ / "missing.db";
  const fs::path newer = dir_ / "newer.db";
  const std::string future = std::to_string(runner::store::kSchemaVersion + 1);
  exec_raw(newer, "CREATE TABLE x (y); PRAGMA user_version = " + future + ";");
  const fs::path foreign = dir_ / "foreign.db";
  exec_raw(foreign, "CREATE TABLE x (y);");
  Store all = Store::open(db_path_);
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, missing}), Error,
                   "database '" + missing.string() + "' does not exist");
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, newer}), Error,
                   "database '" + newer.string() +
                       "' has schema version " + future + ", newer than this runner supports (" + std::to_string(runner::store::kSchemaVersion) + ")");
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, foreign}), Error,
                   "'" + foreign.string() +
                       "' is not a runner database: it has tables but no runner schema version");
  try {
    all.merge_from(missing);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
  }
  EXPECT_EQ(count(all, "experiments"), 0);
  EXPECT_EQ(count(all, "runs"), 0);
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(StoreTest, MergeOfConflictingIdentitiesRollsBackEverything) {
  const fs::path a = dir_ / "a.db";
  const fs::path b = dir_ / "b.db";
  write_shard(a, {{"t1"}, "fp-a"});
  {
    Store store = Store::open(b);
    const std::int64_t e = store.upsert_experiment("sweep", "/exp/sweep.toml", "[experiment]\n");
    store.upsert_trial(e, R"({"t":"different"})", "h-t1", "t1", "");
  }
  Store all = Store::open(db_path_);
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, b}), Error,
                   "cannot merge database '" + b.string() +
                       "': trial t1 of experiment 'sweep' is already stored with a different "
                       "configuration");
  EXPECT_EQ(count(all, "experiments"), 0);  // a's part is rolled back too
  EXPECT_EQ(count(all, "runs"), 0);

  const fs::path c = dir_ / "c.db";
  {
    Store store = Store::open(c);
    store.upsert_fingerprint("fp-shared", R"({"host":"elsewhere"})");
  }
  EXPECT_THROW_MSG(all.merge_from(std::vector<fs::path>{a, c}), Error,
                   "cannot merge database '" + c.string() +
                       "': fingerprint fp-shared is already stored with different contents");
  EXPECT_EQ(count(all, "fingerprints"), 0);
  // The store is still usable.
  EXPECT_EQ(all.merge_from(a).runs.added, 2);
}

TEST_F(StoreTest, MergeCopiesStaleRunsAsInterruptedAndSkipsLiveOnes) {
  const fs::path a = dir_ / "a.db";
  std::int64_t stale = 0;
  std::int64_t live = 0;
  {
    Store shard = Store::open(a);
    const Ids ids = add_trial(shard);
    stale = begin(shard, ids, RunKind::train, 0);
    live = begin(shard, ids, RunKind::train, 1);
    shard.add_samples(stale, {Sample{}});
    shard.add_samples(live, {Sample{}});
    ASSERT_EQ(sqlite3_exec(handle(shard),
                           ("UPDATE runs SET heartbeat_at = '2024-05-01T10:00:00.000Z', pid = 5 "
                            "WHERE id = " + std::to_string(stale)).c_str(),
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  Store all = Store::open(db_path_);
  const auto counts = all.merge_from(a);
  EXPECT_EQ(counts.runs.added, 1);
  EXPECT_EQ(counts.runs_running, 1);
  EXPECT_EQ(counts.samples.added, 1);
  EXPECT_EQ(counts.samples.present, 0);
  const auto rows = all.list_runs();
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].stored_status, RunStatus::interrupted);
  EXPECT_EQ(rows[0].finished_at, "2024-05-01T10:00:00.000Z");
  EXPECT_EQ(all.get_run(rows[0].id)->error,
            "no heartbeat since 2024-05-01T10:00:00.000Z (pid 5); the runner process stopped "
            "without recording a verdict");
  // The shard itself is untouched (read-only input).
  const Store shard = Store::open_read_only(a);
  EXPECT_EQ(shard.get_run(stale)->row.stored_status, RunStatus::running);
  // Once the live run has finished, the next merge brings it.
  {
    Store writer = Store::open(a);
    writer.finish_run(live, RunStatus::finished, "", {}, {});
  }
  const auto later = all.merge_from(a);
  EXPECT_EQ(later.runs.added, 1);
  EXPECT_EQ(later.runs.present, 1);
  EXPECT_EQ(later.runs_running, 0);
  EXPECT_EQ(count(all, "runs"), 2);
}

TEST_F(StoreTest, MergeReadsAVersion1ShardAndDoesNotDuplicateItLater) {
  const fs::path old = dir_ / "old.db";
  write_v1_file(old);
  Store all = Store::open(db_path_);
  const auto first = all.merge_from(old);
  EXPECT_EQ(first.experiments.added, 1);
  EXPECT_EQ(first.trials.added, 2);
  EXPECT_EQ(first.runs.added, 2);  // the v1 running run is stale: copied as interrupted
  EXPECT_EQ(first.samples.added, 3);
  EXPECT_EQ(query_text(handle(all), "SELECT identity FROM trials ORDER BY id LIMIT 1"), "cfg1");
  // The input file stays at version 1.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(old.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    EXPECT_EQ(query_int(db, "PRAGMA user_version"), 1);
    sqlite3_close(db);
  }
  EXPECT_EQ(all.merge_from(old).runs.added, 0);
  // Migrated in place by a newer runner, it is still the same runs.
  { Store upgraded = Store::open(old); }
  const auto after_upgrade = all.merge_from(old);
  EXPECT_EQ(after_upgrade.runs.added, 0);
  EXPECT_EQ(after_upgrade.runs.present, 2);  // the stale "running" one matches its copy too
  EXPECT_EQ(after_upgrade.runs_running, 0);
  EXPECT_EQ(count(all, "runs"), 2);
}

TEST_F(StoreTest, MergeFillsAMissingLabel) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1"}, "fp-a"});
  Store all = Store::open(db_path_);
  const std::int64_t e = all.upsert_experiment("sweep", "", "[experiment]\n");
  const std::int64_t t = all.upsert_trial(e, R"({"t":"t1"})", "h-t1", "t1", "");
  const auto counts = all.merge_from(a);
  EXPECT_EQ(counts.trials.present, 1);
  EXPECT_EQ(query_text(handle(all), "SELECT label FROM trials WHERE id = " + std::to_string(t)),
            "t=t1");
}

TEST_F(StoreTest, MergeCarriesATrialsEnvironment) {
  const fs::path a = dir_ / "a.db";
  {
    Store shard = Store::open(a);
    const std::int64_t e = shard.upsert_experiment("env", "", "[experiment]\n");
    static_cast<void>(shard.upsert_trial(e, R"({"t":"t1"})", "h-t1", "t1", "", R"({"cpu.model":"x"})"));
  }
  Store all = Store::open(db_path_);
  static_cast<void>(all.merge_from(a));
  EXPECT_EQ(query_text(handle(all), "SELECT environment FROM trials WHERE identity = 't1'"),
            R"({"cpu.model":"x"})");
}

TEST_F(StoreTest, MergeOfManySamplesIsQuick) {
  const fs::path a = dir_ / "a.db";
  write_shard(a, {{"t1", "t2"}, "fp-a", 5, 10000});  // 10 runs x 10,000 steps
  Store all = Store::open(db_path_);
  const auto start = std::chrono::steady_clock::now();
  const auto counts = all.merge_from(a);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(counts.samples.added, 100000);
  EXPECT_EQ(count(all, "samples"), 100000);
  RecordProperty("merge_seconds_100k_samples", std::to_string(seconds));
  std::cout << "merged 100,000 samples in " << seconds << " s\n";
  EXPECT_EQ(query_text(handle(all), "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, EveryPhaseRoundTripsThroughWriteReadAndMerge) {
  // One step per phase with only that phase timed, then a step with all of
  // them: every value must land in its own column and come back from it.
  using runner::store::kPhaseCount;
  using runner::store::kPhases;
  std::vector<Sample> written;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    Sample one;
    one.step = static_cast<std::int64_t>(p);
    one.wall_ns = 1000;
    one.phase_ns[p] = 10.0 * static_cast<double>(p + 1) + 0.5;
    written.push_back(one);
  }
  Sample all;
  all.step = static_cast<std::int64_t>(kPhaseCount);
  all.wall_ns = 1000;
  for (std::size_t p = 0; p < kPhaseCount; ++p) all.phase_ns[p] = 100.0 + static_cast<double>(p);
  written.push_back(all);

  const auto expect_written = [&](const std::vector<Sample>& back, const std::string& where) {
    ASSERT_EQ(back.size(), written.size()) << where;
    for (std::size_t i = 0; i < written.size(); ++i)
      for (const auto& phase : kPhases)
        EXPECT_DOUBLE_EQ(back[i].phase(phase.phase), written[i].phase(phase.phase))
            << where << ": step " << i << ", phase " << phase.name;
  };

  const fs::path shard = dir_ / "shard.db";
  {
    Store store = Store::open(shard);
    const std::int64_t run = begin(store, add_trial(store));
    store.add_samples(run, written);
    store.finish_run(run, RunStatus::finished, "", {}, {});
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      const std::string column = kPhases[p].column;
      EXPECT_EQ(query_real(handle(store), "SELECT " + column + " FROM samples WHERE step = " +
                                              std::to_string(p)),
                written[p].phase_ns[p])
          << column;
      // Its own step and the step with every phase; NULL in the others.
      EXPECT_EQ(query_int(handle(store),
                          "SELECT count(*) FROM samples WHERE " + column + " IS NOT NULL"),
                2)
          << column;
    }
    expect_written(store.samples(run), "written");
  }
  Store merged = Store::open(db_path_);
  EXPECT_EQ(merged.merge_from(shard).samples.added,
            static_cast<std::int64_t>(written.size()));
  ASSERT_EQ(merged.list_runs().size(), 1U);
  expect_written(merged.samples(merged.list_runs()[0].id), "merged");
}

}  // namespace
