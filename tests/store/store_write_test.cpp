// The store: writing experiments, trials, fingerprints and runs (store/src/write.cpp).
#include "store_fixture.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/sha256.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

using namespace store_test;
using runner::Error;
using runner::ErrorKind;
using runner::store::Metric;
using runner::store::PluginRecord;

// --- writing --------------------------------------------------------------

TEST_F(StoreTest, UpsertsAreIdempotent) {
  Store store = Store::open(db_path_);
  const std::int64_t e1 = store.upsert_experiment("amp", "/a/amp.toml", "text v1");
  // Identity is name + source text; the path it was read from does not matter.
  EXPECT_EQ(store.upsert_experiment("amp", "/b/amp.toml", "text v1"), e1);
  const std::int64_t e2 = store.upsert_experiment("amp", "/a/amp.toml", "text v2");
  EXPECT_NE(e2, e1);
  EXPECT_NE(store.upsert_experiment("other", "/a/amp.toml", "text v1"), e1);
  EXPECT_EQ(query_text(handle(store), "SELECT source_sha256 FROM experiments WHERE id = " +
                                           std::to_string(e1)),
            runner::sha256_hex("text v1"));
  EXPECT_EQ(query_text(handle(store), "SELECT source_path FROM experiments WHERE id = " +
                                           std::to_string(e1)),
            "/a/amp.toml");

  const std::int64_t t1 = store.upsert_trial(e1, R"({"lr":1})", "h1", "id1", "lr=1");
  EXPECT_EQ(store.upsert_trial(e1, R"({"lr":1})", "h1", "id1", "lr=1"), t1);
  EXPECT_NE(store.upsert_trial(e1, R"({"lr":2})", "h2", "id2", "lr=2"), t1);
  EXPECT_NE(store.upsert_trial(e2, R"({"lr":1})", "h1", "id1", "lr=1"), t1);

  const std::int64_t f1 = store.upsert_fingerprint("fp", "{}");
  EXPECT_EQ(store.upsert_fingerprint("fp", "{}"), f1);
  EXPECT_NE(store.upsert_fingerprint("fp2", "{}"), f1);

  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM experiments"), 3);
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM trials"), 3);
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM fingerprints"), 2);
  EXPECT_TRUE(is_iso_utc_millis(query_text(handle(store), "SELECT created_at FROM trials")));
}

TEST_F(StoreTest, SameHashWithDifferentContentIsRejected) {
  Store store = Store::open(db_path_);
  const std::int64_t e = store.upsert_experiment("amp", "", "text");
  store.upsert_trial(e, R"({"lr":1})", "h1", "id1", "");
  EXPECT_THROW_MSG(store.upsert_trial(e, R"({"lr":2})", "h1", "id1", ""), Error,
                   "trial id1 is already stored with a different configuration");
  EXPECT_THROW_MSG(store.upsert_trial(e, R"({"lr":1})", "h2", "id1", ""), Error,
                   "trial id1 is already stored with a different configuration");
  store.upsert_fingerprint("fp", "{}");
  EXPECT_THROW_MSG(store.upsert_fingerprint("fp", R"({"x":1})"), Error,
                   "fingerprint fp is already stored with different contents");
}

TEST_F(StoreTest, ForeignKeysAreEnforced) {
  Store store = Store::open(db_path_);
  RunStart start;
  start.trial_id = 999;
  start.kind = RunKind::train;
  EXPECT_THROW_MSG(store.begin_run(start), Error,
                   "cannot record the start of a run: FOREIGN KEY constraint failed");
  EXPECT_THROW_MSG(store.add_samples(12345, {Sample{}}), Error,
                   "cannot record the samples of run 12345: FOREIGN KEY constraint failed");
}

TEST_F(StoreTest, FinishRunIsAllOrNothing) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": ";
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {summary("step_time", 1)},
                                    {{"samples_per_s", 1, "1/s"}, {"samples_per_s", 2, "1/s"}}),
                   Error, prefix + "UNIQUE constraint failed: metrics.run_id, metrics.name");
  sqlite3* db = handle(store);
  const std::string id = std::to_string(run);
  EXPECT_EQ(query_text(db, "SELECT status FROM runs WHERE id = " + id), "running");
  EXPECT_EQ(query_text(db, "SELECT finished_at FROM runs WHERE id = " + id), "<null>");
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM summaries"), 0);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM metrics"), 0);
  // The connection is usable and the run can still be finished properly.
  store.finish_run(run, RunStatus::finished, "", {summary("step_time", 1)},
                   {{"samples_per_s", 1, "1/s"}});
  EXPECT_EQ(store.get_run(run)->row.status, RunStatus::finished);
}

TEST_F(StoreTest, FinishRunRejectsRunningAndUnknownStatus) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": ";
  const std::string expected =
      "' (expected finished, failed, crashed, timeout, interrupted or diverged)";
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::running, "", {}, {}), Error,
                   prefix + "invalid status 'running" + expected);
  try {
    store.finish_run(run, RunStatus::running, "", {}, {});
    ADD_FAILURE() << "expected finish_run to throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::run);
  }
  EXPECT_EQ(store.get_run(run)->row.status, RunStatus::running);
  // An unknown status is a type error now; its text is refused where text
  // becomes a status.
  EXPECT_THROW_MSG(static_cast<void>(runner::store::parse_run_status("done")), Error,
                   "unknown run status 'done' (expected running, finished, failed, crashed, "
                   "timeout, interrupted or diverged)");
  EXPECT_THROW_MSG(static_cast<void>(runner::store::parse_run_status("Finished")), Error,
                   "unknown run status 'Finished' (expected running, finished, failed, crashed, "
                   "timeout, interrupted or diverged)");
  EXPECT_EQ(runner::store::parse_run_status("finished"), RunStatus::finished);
  // The CHECK constraint guards the column for writers that bypass Store.
  EXPECT_NE(sqlite3_exec(handle(store), "UPDATE runs SET status = 'done'", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
}

TEST_F(StoreTest, FinishRunTwiceOrUnknownRunIsRejected) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  store.finish_run(run, RunStatus::timeout, "exceeded 60 s", {}, {});
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}), Error,
                   "cannot finish run " + std::to_string(run) +
                       ": it already has status 'timeout'");
  const auto detail = store.get_run(run);
  EXPECT_EQ(detail->row.status, RunStatus::timeout);
  EXPECT_EQ(detail->error, "exceeded 60 s");
  EXPECT_THROW_MSG(store.finish_run(999, RunStatus::failed, "", {}, {}), Error,
                   "cannot finish run 999: no such run");
}

TEST_F(StoreTest, EveryFinalStatusIsAccepted) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  for (const RunStatus status : runner::store::kRunStatuses) {
    if (status == RunStatus::running) continue;
    const std::int64_t run = begin(store, ids);
    store.finish_run(run, status, "", {}, {});
    EXPECT_EQ(store.get_run(run)->row.status, status);
    // The text at the SQL boundary is the documented spelling.
    EXPECT_EQ(
        query_text(handle(store), "SELECT status FROM runs WHERE id = " + std::to_string(run)),
        to_string(status));
  }
}

TEST_F(StoreTest, HeartbeatMovesForwardAndUnknownRunIsAnError) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  const std::string id = std::to_string(run);
  sqlite3* db = handle(store);
  ASSERT_EQ(sqlite3_exec(db, ("UPDATE runs SET heartbeat_at = '2000-01-01T00:00:00.000Z' WHERE id = " + id).c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  store.heartbeat(run);
  const std::string beat = query_text(db, "SELECT heartbeat_at FROM runs WHERE id = " + id);
  EXPECT_TRUE(is_iso_utc_millis(beat)) << beat;
  EXPECT_GT(beat, "2000-01-01T00:00:00.000Z");
  EXPECT_THROW_MSG(store.heartbeat(999), Error,
                   "cannot update the heartbeat of run 999: no such run");
}

TEST_F(StoreTest, DuplicateSampleStepRollsBackTheWholeBatch) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  std::vector<Sample> samples(3);
  samples[0].step = 0;
  samples[1].step = 1;
  samples[2].step = 1;
  EXPECT_THROW_MSG(store.add_samples(run, samples), Error,
                   "cannot record the samples of run " + std::to_string(run) +
                       ": UNIQUE constraint failed: samples.run_id, samples.step");
  EXPECT_TRUE(store.samples(run).empty());
}

TEST_F(StoreTest, NaNSummaryValuesRoundTrip) {
  Store store = Store::open(db_path_);
  const std::int64_t run = begin(store, add_trial(store));
  Summary one = summary("step_time", 5);
  one.n = 1;
  one.stddev = kNaN;
  store.finish_run(run, RunStatus::finished, "", {one}, {{"flops", kNaN, "1/s"}});
  const auto detail = store.get_run(run);
  ASSERT_EQ(detail->summaries.size(), 1U);
  EXPECT_TRUE(std::isnan(detail->summaries[0].stddev));
  EXPECT_DOUBLE_EQ(detail->summaries[0].p50, 5);
  ASSERT_EQ(detail->metrics.size(), 1U);
  EXPECT_TRUE(std::isnan(detail->metrics[0].value));
}

TEST_F(StoreTest, RunWithoutFingerprintIsRecorded) {
  Store store = Store::open(db_path_);
  Ids ids = add_trial(store);
  ids.fingerprint = 0;
  const std::int64_t run = begin(store, ids);
  const auto detail = store.get_run(run);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->fingerprint_hash, "");
  EXPECT_EQ(detail->fingerprint_json, "");
}

TEST_F(StoreTest, DeletingAnExperimentCascades) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  store.add_plugins(run, {{"model", "mlp", "/lib/libmlp.so", "1", "aa"}});
  store.add_samples(run, {Sample{}});
  store.finish_run(run, RunStatus::finished, "", {summary("step_time", 1)},
                   {{"samples_per_s", 1, ""}});
  sqlite3* db = handle(store);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM experiments", nullptr, nullptr, nullptr), SQLITE_OK);
  for (const char* table : {"trials", "runs", "run_plugins", "samples", "summaries", "metrics"})
    EXPECT_EQ(query_int(db, std::string("SELECT count(*) FROM ") + table), 0) << table;
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM fingerprints"), 1);  // shared, kept
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
}

// --- trial identity ---------------------------------------------------------

TEST_F(StoreTest, TrialsKeepTheEnvironmentOfTheirIdentity) {
  Store store = Store::open(db_path_);
  const std::int64_t e = store.upsert_experiment("env", "", "text");
  // Two environments of one configuration: two trials, newest run first.
  const std::int64_t t1 =
      store.upsert_trial(e, R"({"lr":1})", "h1", "id-env1", "", R"({"env.OMP_NUM_THREADS":"1"})");
  const std::int64_t t2 =
      store.upsert_trial(e, R"({"lr":1})", "h1", "id-env2", "", R"({"env.OMP_NUM_THREADS":"2"})");
  // The first environment written stays; a trial recorded without one gets one.
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "id-env1", "", R"({"other":"x"})"), t1);
  const std::int64_t t3 = store.upsert_trial(e, R"({"lr":1})", "h1", "id-none", "");
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "id-none", "", R"({"late":"1"})"), t3);
  // Only trials with runs count, and the one run last comes first.
  EXPECT_TRUE(store.environments_of_config("h1").empty());
  Ids ids;
  ids.trial = t2;
  static_cast<void>(begin(store, ids));
  ids.trial = t1;
  static_cast<void>(begin(store, ids));
  const auto recorded = store.environments_of_config("h1");
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0], std::make_pair(std::string("id-env1"),
                                        std::string(R"({"env.OMP_NUM_THREADS":"1"})")));
  EXPECT_EQ(recorded[1].first, "id-env2");
  EXPECT_TRUE(store.environments_of_config("h2").empty());
  EXPECT_EQ(query_text(handle(store), "SELECT environment FROM trials WHERE id = " +
                                          std::to_string(t3)),
            R"({"late":"1"})");
}

TEST_F(StoreTest, TrialIdentityIncludesPluginHashesAndKeepsItsLabel) {
  Store store = Store::open(db_path_);
  const std::int64_t e = store.upsert_experiment("amp", "", "text");
  // Same configuration, rebuilt plugin: another trial.
  const std::int64_t t1 = store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginA", "");
  const std::int64_t t2 = store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginB", "lr=1");
  EXPECT_NE(t1, t2);
  // A trial stored without a label gets the first one written; later ones do not replace it.
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginA", "lr=1"), t1);
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginA", "other"), t1);
  EXPECT_EQ(store.upsert_trial(e, R"({"lr":1})", "h1", "h1+pluginB", ""), t2);
  sqlite3* db = handle(store);
  EXPECT_EQ(query_text(db, "SELECT label FROM trials WHERE id = " + std::to_string(t1)), "lr=1");
  EXPECT_EQ(query_text(db, "SELECT label FROM trials WHERE id = " + std::to_string(t2)), "lr=1");
  EXPECT_EQ(query_text(db, "SELECT identity FROM trials WHERE id = " + std::to_string(t2)),
            "h1+pluginB");

  EXPECT_EQ(store.find_experiment("amp", "text"), e);
  EXPECT_EQ(store.find_experiment("amp", "other text"), std::nullopt);
  EXPECT_EQ(store.find_trial(e, "h1+pluginB"), t2);
  EXPECT_EQ(store.find_trial(e, "h1"), std::nullopt);
  EXPECT_EQ(store.find_trial(e + 1, "h1+pluginB"), std::nullopt);

  Ids ids;
  ids.trial = t2;
  const std::int64_t run = begin(store, ids);
  const auto detail = store.get_run(run);
  EXPECT_EQ(detail->identity, "h1+pluginB");
  EXPECT_EQ(detail->row.label, "lr=1");
  EXPECT_EQ(detail->experiment_id, e);
  EXPECT_EQ(store.list_runs()[0].label, "lr=1");
  EXPECT_EQ(query_text(db, "SELECT label FROM run_overview"), "lr=1");
}

// --- runs: pid, uuid, signal --------------------------------------------------

TEST_F(StoreTest, BeginRunRecordsPidAndAFreshUuid) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t mine = begin(store, ids);
  RunStart start;
  start.trial_id = ids.trial;
  start.kind = RunKind::train;
  start.pid = 4242;
  const std::int64_t other = store.begin_run(start);
  const auto a = store.get_run(mine);
  const auto b = store.get_run(other);
  ASSERT_TRUE(a->pid.has_value());
  EXPECT_EQ(*a->pid, ::getpid());
  EXPECT_EQ(*b->pid, 4242);
  EXPECT_TRUE(is_uuid(a->uuid)) << a->uuid;
  EXPECT_TRUE(is_uuid(b->uuid)) << b->uuid;
  EXPECT_NE(a->uuid, b->uuid);
  EXPECT_TRUE(is_iso_utc_millis(a->heartbeat_at)) << a->heartbeat_at;
  EXPECT_FALSE(a->signal.has_value());
}

TEST_F(StoreTest, FinishRunRecordsTheSignal) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t crashed = begin(store, ids);
  store.finish_run(crashed, RunStatus::crashed, "killed by signal 11 (SIGSEGV)", {}, {}, 11);
  const auto detail = store.get_run(crashed);
  EXPECT_EQ(detail->row.status, RunStatus::crashed);
  ASSERT_TRUE(detail->signal.has_value());
  EXPECT_EQ(*detail->signal, 11);
  EXPECT_EQ(query_int(handle(store), "SELECT signal FROM run_overview WHERE run_id = " +
                                          std::to_string(crashed)),
            11);

  const std::int64_t run = begin(store, ids);
  const std::string prefix = "cannot finish run " + std::to_string(run) + ": invalid signal ";
  const std::string expected =
      "' (expected 0, or a positive signal number for a run that did not finish)";
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::finished, "", {}, {}, 9), Error,
                   prefix + "9 for status 'finished" + expected);
  EXPECT_THROW_MSG(store.finish_run(run, RunStatus::crashed, "", {}, {}, -1), Error,
                   prefix + "-1 for status 'crashed" + expected);
  EXPECT_EQ(store.get_run(run)->row.status, RunStatus::running);
}

TEST_F(StoreTest, MarkStaleRunsInterruptedConvertsOnlyStaleRuns) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t stale = begin(store, ids, RunKind::train, 0);
  const std::int64_t alive = begin(store, ids, RunKind::train, 1);
  sqlite3* db = handle(store);
  ASSERT_EQ(sqlite3_exec(db,
                         ("UPDATE runs SET heartbeat_at = '2024-05-01T10:00:00.000Z', pid = 77 "
                          "WHERE id = " + std::to_string(stale)).c_str(),
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_EQ(store.mark_stale_runs_interrupted(), 1);
  const auto detail = store.get_run(stale);
  EXPECT_EQ(detail->row.status, RunStatus::interrupted);
  EXPECT_EQ(detail->row.stored_status, RunStatus::interrupted);
  EXPECT_EQ(detail->row.finished_at, "2024-05-01T10:00:00.000Z");
  EXPECT_EQ(detail->error,
            "no heartbeat since 2024-05-01T10:00:00.000Z (pid 77); the runner process stopped "
            "without recording a verdict");
  EXPECT_EQ(store.get_run(alive)->row.stored_status, RunStatus::running);
  EXPECT_EQ(store.mark_stale_runs_interrupted(), 0);
  // The late process cannot overwrite the verdict any more.
  EXPECT_THROW_MSG(store.finish_run(stale, RunStatus::finished, "", {}, {}), Error,
                   "cannot finish run " + std::to_string(stale) +
                       ": it already has status 'interrupted'");
  EXPECT_EQ(query_text(db, "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, MarkInterruptedFinishesOnlyARunningRun) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t run = begin(store, ids);
  EXPECT_TRUE(store.mark_interrupted(run, "interrupted by the user (SIGINT)"));
  auto detail = store.get_run(run);
  EXPECT_EQ(detail->row.status, RunStatus::interrupted);
  EXPECT_EQ(detail->error, "interrupted by the user (SIGINT)");
  EXPECT_TRUE(is_iso_utc_millis(detail->row.finished_at));
  // Second Ctrl-C, or the run finished first: nothing changes.
  EXPECT_FALSE(store.mark_interrupted(run, "again"));
  EXPECT_EQ(store.get_run(run)->error, "interrupted by the user (SIGINT)");
  const std::int64_t finished = begin(store, ids);
  store.finish_run(finished, RunStatus::finished, "", {}, {});
  EXPECT_FALSE(store.mark_interrupted(finished, "late"));
  EXPECT_EQ(store.get_run(finished)->row.status, RunStatus::finished);
  EXPECT_THROW_MSG(store.mark_interrupted(999, ""), Error,
                   "cannot mark run 999 interrupted: no such run");
}

// --- claims (schema 4) -----------------------------------------------------------

RunStart claim_start(std::int64_t trial, std::int64_t repeat) {
  RunStart start;
  start.trial_id = trial;
  start.repeat_index = repeat;
  start.kind = RunKind::train;
  return start;
}

TEST_F(StoreTest, AClaimIsTakenOnceWhileItsRunIsRunning) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const auto always = [](const std::vector<runner::store::TrialRun>&) { return true; };
  const auto first = store.claim_run(claim_start(ids.trial, 0), "cfg1", always);
  ASSERT_TRUE(first.has_value());
  // A second runner asks for the same repetition while the first one runs:
  // even a decision to run again (--force) cannot make two live claims.
  EXPECT_FALSE(store.claim_run(claim_start(ids.trial, 0), "cfg1", always).has_value());
  // Another repetition is another claim.
  EXPECT_TRUE(store.claim_run(claim_start(ids.trial, 1), "cfg1", always).has_value());
  // Once the run has a verdict, its repetition can be claimed again.
  store.finish_run(*first, RunStatus::failed, "x", {}, {});
  EXPECT_TRUE(store.claim_run(claim_start(ids.trial, 0), "cfg1", always).has_value());
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(query_text(handle(store), "SELECT claim FROM runs WHERE id = " +
                                          std::to_string(*first)),
            "cfg1:0:0");
}

TEST_F(StoreTest, TheDecisionSeesEveryRunOfTheIdentityInsideTheClaim) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const std::int64_t done = begin(store, ids, RunKind::train, 0);
  store.finish_run(done, RunStatus::finished, "", {}, {});
  std::vector<runner::store::TrialRun> seen;
  const auto claimed = store.claim_run(claim_start(ids.trial, 0), "cfg1",
                                       [&](const std::vector<runner::store::TrialRun>& existing) {
                                         seen = existing;
                                         return false;  // finished: resume skips it
                                       });
  EXPECT_FALSE(claimed.has_value());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].run_id, done);
  EXPECT_EQ(seen[0].status, RunStatus::finished);
  EXPECT_EQ(query_int(handle(store), "SELECT count(*) FROM runs"), 1);
}

TEST_F(StoreTest, AStaleClaimGivesWayToANewOne) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  const auto always = [](const std::vector<runner::store::TrialRun>&) { return true; };
  const auto old = store.claim_run(claim_start(ids.trial, 0), "cfg1", always);
  ASSERT_TRUE(old.has_value());
  age_heartbeat(handle(store), *old, 3600);  // its runner stopped an hour ago
  const auto fresh = store.claim_run(claim_start(ids.trial, 0), "cfg1", always);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(store.get_run(*old)->row.stored_status, RunStatus::interrupted);
  EXPECT_EQ(store.get_run(*fresh)->row.stored_status, RunStatus::running);
}

TEST_F(StoreTest, ClaimsRecordWhatIdentifiesTheirProcess) {
  Store store = Store::open(db_path_);
  const Ids ids = add_trial(store);
  RunStart start = claim_start(ids.trial, 0);
  start.pid = 4242;
  start.host = "node7";
  start.boot_id = "b00t";
  start.pid_start = 123456;
  ASSERT_TRUE(store.claim_run(start, "cfg1", [](const auto&) { return true; }).has_value());
  const auto running = store.running_runs();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].pid, 4242);
  EXPECT_EQ(running[0].hostname, "node7");
  EXPECT_EQ(running[0].boot_id, "b00t");
  EXPECT_EQ(running[0].pid_start, 123456);
}

}  // namespace
