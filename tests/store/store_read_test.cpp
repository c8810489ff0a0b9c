// The store: reading runs back, through the API and the views (store/src/read.cpp).
#include "store_fixture.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using namespace store_test;
using runner::Error;
using runner::ErrorKind;

TEST_F(StoreTest, FullRunLifecycleRoundTrips) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  ASSERT_GT(run, 0);
  {
    const auto detail = store.get_run(run);
    ASSERT_TRUE(detail.has_value());
    EXPECT_EQ(detail->row.status, RunStatus::running);
    EXPECT_EQ(detail->row.finished_at, "");
    EXPECT_TRUE(is_iso_utc_millis(detail->row.started_at)) << detail->row.started_at;
    EXPECT_FALSE(detail->row.headline.has_value());
  }

  store.add_plugins(run, {{"model", "mlp", "/lib/libmlp.so", "1.0", "aa"},
                          {"optimizer", "sgd", "/lib/libsgd.so", "1.1", "bb"}});

  std::vector<Sample> samples(3);
  samples[0] = make_sample(0, true, 100, 10, 40, 30, 20, 2.5);
  // No data wait, no optimizer, no loss:
  samples[1] = make_sample(1, false, 90, -1, 35, 30, -1, kNaN);
  samples[2] = make_sample(2, false, 80, 5, 30, 25, 20, 1.5);
  store.add_samples(run, samples);
  EXPECT_EQ(query_int(handle(store),
                      "SELECT count(*) FROM samples WHERE data_ns IS NULL AND optimizer_ns IS "
                      "NULL AND loss IS NULL AND step = 1"),
            1);
  store.heartbeat(run);

  store.finish_run(run, RunStatus::finished, "", {summary("step_time", 85), summary("forward", 32)},
                   {{"samples_per_s", 1234.5, "1/s"}, {"final_loss", 1.5, ""}});

  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->row.id, run);
  EXPECT_EQ(detail->row.experiment, "amp");
  EXPECT_EQ(detail->row.trial_id, ids.trial);
  EXPECT_EQ(detail->row.repeat_index, 0);
  EXPECT_EQ(detail->row.kind, RunKind::train);
  EXPECT_EQ(detail->row.status, RunStatus::finished);
  EXPECT_TRUE(is_iso_utc_millis(detail->row.finished_at)) << detail->row.finished_at;
  EXPECT_GE(detail->row.finished_at, detail->row.started_at);
  ASSERT_TRUE(detail->row.headline.has_value());
  EXPECT_DOUBLE_EQ(*detail->row.headline, 85);
  EXPECT_EQ(detail->error, "");
  EXPECT_EQ(detail->config_json, std::string(R"({"lr":0.1})") + "cfg1");
  EXPECT_EQ(detail->config_hash, "cfg1");
  EXPECT_EQ(detail->fingerprint_json, R"({"host":"a"})");
  EXPECT_EQ(detail->fingerprint_hash, "fp1");
  EXPECT_DOUBLE_EQ(detail->load_average, 0.5);
  EXPECT_EQ(detail->seed, 42);
  EXPECT_EQ(detail->rank, 0);
  ASSERT_EQ(detail->plugins.size(), 2U);
  EXPECT_EQ(detail->plugins[0].kind, "model");
  EXPECT_EQ(detail->plugins[0].name, "mlp");
  EXPECT_EQ(detail->plugins[0].library, "/lib/libmlp.so");
  EXPECT_EQ(detail->plugins[0].version, "1.0");
  EXPECT_EQ(detail->plugins[0].sha256, "aa");
  EXPECT_EQ(detail->plugins[1].name, "sgd");
  ASSERT_EQ(detail->summaries.size(), 2U);  // ordered by metric
  EXPECT_EQ(detail->summaries[0].metric, "forward");
  EXPECT_EQ(detail->summaries[1].metric, "step_time");
  EXPECT_EQ(detail->summaries[1].unit, "ns");
  EXPECT_EQ(detail->summaries[1].n, 10);
  EXPECT_DOUBLE_EQ(detail->summaries[1].mean, 86);
  EXPECT_DOUBLE_EQ(detail->summaries[1].stddev, 2);
  EXPECT_DOUBLE_EQ(detail->summaries[1].min, 80);
  EXPECT_DOUBLE_EQ(detail->summaries[1].p90, 90);
  EXPECT_DOUBLE_EQ(detail->summaries[1].p99, 94);
  EXPECT_DOUBLE_EQ(detail->summaries[1].max, 95);
  ASSERT_EQ(detail->metrics.size(), 2U);  // ordered by name
  EXPECT_EQ(detail->metrics[0].name, "final_loss");
  EXPECT_EQ(detail->metrics[1].name, "samples_per_s");
  EXPECT_DOUBLE_EQ(detail->metrics[1].value, 1234.5);
  EXPECT_EQ(detail->metrics[1].unit, "1/s");
  EXPECT_EQ(detail->sample_count, 3);

  const auto back = store.samples(run);
  ASSERT_EQ(back.size(), 3U);
  EXPECT_TRUE(back[0].warmup);
  EXPECT_FALSE(back[1].warmup);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back[i].step, samples[i].step);
    EXPECT_DOUBLE_EQ(back[i].wall_ns, samples[i].wall_ns);
    for (const auto& phase : runner::store::kPhases)
      EXPECT_DOUBLE_EQ(back[i].phase(phase.phase), samples[i].phase(phase.phase)) << phase.name;
  }
  EXPECT_DOUBLE_EQ(back[1].phase(Phase::data), -1);
  EXPECT_DOUBLE_EQ(back[1].phase(Phase::optimizer), -1);
  EXPECT_TRUE(std::isnan(back[1].loss));
  EXPECT_DOUBLE_EQ(back[0].loss, 2.5);

  const auto rows = store.list_runs();
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].id, run);
  EXPECT_EQ(rows[0].status, RunStatus::finished);
  ASSERT_TRUE(rows[0].headline.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].headline, 85);

  EXPECT_FALSE(store.get_run(run + 100).has_value());
  EXPECT_TRUE(store.samples(run + 100).empty());
  EXPECT_EQ(query_text(handle(store), "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(handle(store), "PRAGMA foreign_key_check"), "");
}

TEST_F(StoreTest, RunOverviewViewFlattensARun) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t train = begin(store, ids, RunKind::train, 0);
  store.finish_run(train, RunStatus::finished, "", {summary("step_time", 85), summary("latency", 7)},
                   {{"samples_per_s", 1000, "1/s"}});
  const std::int64_t infer = begin(store, ids, RunKind::infer, 1);
  store.finish_run(infer, RunStatus::failed, "out of memory",
                   {summary("step_time", 3), summary("latency", 7)}, {});
  const std::int64_t running = begin(store, ids, RunKind::train, 2);

  sqlite3* db = handle(store);
  const std::string where = " FROM run_overview WHERE run_id = ";
  EXPECT_EQ(query_text(db, "SELECT experiment" + where + std::to_string(train)), "amp");
  EXPECT_EQ(query_int(db, "SELECT trial_id" + where + std::to_string(train)), ids.trial);
  EXPECT_EQ(query_text(db, "SELECT config_hash" + where + std::to_string(train)), "cfg1");
  EXPECT_EQ(query_int(db, "SELECT repeat_index" + where + std::to_string(infer)), 1);
  EXPECT_EQ(query_text(db, "SELECT kind" + where + std::to_string(infer)), "infer");
  EXPECT_EQ(query_text(db, "SELECT status" + where + std::to_string(infer)), "failed");
  EXPECT_EQ(query_text(db, "SELECT error" + where + std::to_string(infer)), "out of memory");
  EXPECT_EQ(query_text(db, "SELECT error" + where + std::to_string(train)), "<null>");
  // Headline: step_time for train, latency for infer.
  EXPECT_EQ(query_text(db, "SELECT p50_ns" + where + std::to_string(train)), "85.0");
  EXPECT_EQ(query_text(db, "SELECT p50_ns" + where + std::to_string(infer)), "7.0");
  EXPECT_EQ(query_text(db, "SELECT samples_per_s" + where + std::to_string(train)), "1000.0");
  EXPECT_EQ(query_text(db, "SELECT samples_per_s" + where + std::to_string(infer)), "<null>");
  EXPECT_EQ(query_int(db, "SELECT duration_s >= 0 AND duration_s < 60" + where +
                              std::to_string(train)),
            1);
  EXPECT_EQ(query_text(db, "SELECT duration_s" + where + std::to_string(running)), "<null>");
  EXPECT_EQ(query_text(db, "SELECT finished_at" + where + std::to_string(running)), "<null>");
  // One row per run, even with several summaries and metrics.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_overview"), 3);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM run_summaries"), 4);
  EXPECT_EQ(query_text(db, "SELECT p50 FROM run_summaries WHERE run_id = " +
                               std::to_string(train) + " AND metric = 'latency'"),
            "7.0");
}

TEST_F(StoreTest, ListRunsNewestFirstWithLimit) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  std::vector<std::int64_t> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(begin(store, ids, RunKind::train, i));
  const auto all = store.list_runs();
  ASSERT_EQ(all.size(), 5U);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].id, runs[4 - i]);
  const auto two = store.list_runs(2);
  ASSERT_EQ(two.size(), 2U);
  EXPECT_EQ(two[0].id, runs[4]);
  EXPECT_EQ(two[1].id, runs[3]);
  EXPECT_EQ(two[0].repeat_index, 4);
}

// --- effective status, stale runs, resume -------------------------------------

TEST_F(StoreTest, StaleRunningRunIsShownAsInterruptedByEveryReader) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t stale = begin(store, ids, RunKind::train, 0);
  const std::int64_t alive = begin(store, ids, RunKind::train, 1);
  const std::int64_t done = begin(store, ids, RunKind::train, 2);
  store.finish_run(done, RunStatus::finished, "", {summary("step_time", 5)}, {});
  sqlite3* db = handle(store);
  age_heartbeat(db, stale, runner::store::kStaleHeartbeatSeconds + 30);
  age_heartbeat(db, alive, runner::store::kStaleHeartbeatSeconds - 30);
  age_heartbeat(db, done, 3600);  // a final status never changes with age

  const auto id = [](std::int64_t run) { return std::to_string(run); };
  const std::string overview = "FROM run_overview WHERE run_id = ";
  EXPECT_EQ(query_text(db, "SELECT status " + overview + id(stale)), "interrupted");
  EXPECT_EQ(query_text(db, "SELECT stored_status " + overview + id(stale)), "running");
  EXPECT_EQ(query_text(db, "SELECT status " + overview + id(alive)), "running");
  EXPECT_EQ(query_text(db, "SELECT status " + overview + id(done)), "finished");
  EXPECT_EQ(query_text(db, "SELECT status FROM run_summaries WHERE run_id = " + id(done)),
            "finished");
  // The raw table keeps what was written.
  EXPECT_EQ(query_text(db, "SELECT status FROM runs WHERE id = " + id(stale)), "running");

  const auto detail = store.get_run(stale);
  EXPECT_EQ(detail->row.status, RunStatus::interrupted);
  EXPECT_EQ(detail->row.stored_status, RunStatus::running);
  EXPECT_EQ(detail->row.finished_at, "");
  EXPECT_EQ(store.get_run(alive)->row.status, RunStatus::running);
  const auto rows = store.list_runs();
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(rows[2].id, stale);
  EXPECT_EQ(rows[2].status, RunStatus::interrupted);
  EXPECT_EQ(rows[1].status, RunStatus::running);

  const auto runs = store.runs_of_trial(ids.trial);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].run_id, stale);
  EXPECT_EQ(runs[0].status, RunStatus::interrupted);
  EXPECT_EQ(runs[0].stored_status, RunStatus::running);
  EXPECT_EQ(runs[1].status, RunStatus::running);
  EXPECT_EQ(runs[2].status, RunStatus::finished);
  EXPECT_EQ(runs[2].repeat_index, 2);
  EXPECT_TRUE(store.runs_of_trial(ids.trial + 100).empty());

  // The process of the stale run is not dead after all: its verdict still wins.
  store.finish_run(stale, RunStatus::finished, "", {}, {});
  EXPECT_EQ(store.get_run(stale)->row.status, RunStatus::finished);
}

TEST_F(StoreTest, UnknownStatusOrKindInTheFileIsAClearError) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  const std::string where = " WHERE id = " + std::to_string(run);
  const std::string prefix = "database '" + db_path_.string() + "': ";
  // Another client may write anything: no CHECK guards runs.kind.
  exec_raw(db_path_, "UPDATE runs SET kind = 'benchmark'" + where);
  const std::string bad_kind = prefix + "unknown run kind 'benchmark' (expected train, infer or kernel)";
  EXPECT_THROW_MSG(static_cast<void>(store.list_runs()), Error, bad_kind);
  EXPECT_THROW_MSG(static_cast<void>(store.get_run(run)), Error, bad_kind);
  EXPECT_THROW_MSG(static_cast<void>(Store::open_read_only(db_path_).list_runs()), Error, bad_kind);
  try {
    static_cast<void>(store.list_runs());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(e.hint(), "another program wrote it; correct the row with an SQLite client, or use "
                        "another database with --db");
  }
  // A client that switched CHECK constraints off can write any status.
  exec_raw(db_path_, "PRAGMA ignore_check_constraints = ON; UPDATE runs SET kind = 'train', "
                     "status = 'done'" + where);
  const std::string bad_status = prefix +
                                 "unknown run status 'done' (expected running, finished, failed, "
                                 "crashed, timeout, interrupted or diverged)";
  EXPECT_THROW_MSG(static_cast<void>(store.list_runs()), Error, bad_status);
  EXPECT_THROW_MSG(static_cast<void>(store.runs_of_trial(ids.trial)), Error, bad_status);
  EXPECT_THROW_MSG(static_cast<void>(store.runs_of_identity("cfg1")), Error, bad_status);
  // Known text reads back as its value.
  exec_raw(db_path_, "UPDATE runs SET kind = 'infer', status = 'running'" + where);
  EXPECT_EQ(store.get_run(run)->row.kind, RunKind::infer);
  EXPECT_EQ(store.runs_of_trial(ids.trial).at(0).status, RunStatus::running);
}

}  // namespace
