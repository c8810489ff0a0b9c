// The migration steps, one per schema version. Each entry creates the
// version equal to its index + 1; a file at user_version N gets entries N..
// applied in order. Never edit a released entry: a database written by it
// exists somewhere. Add a new one instead, bump kSchemaVersion and update
// docs/store.md (a new phase: "Adding a phase" there).
#include <array>
#include <stdexcept>
#include <string>

#include "schema.hpp"

namespace runner::store::detail {
namespace {

#define RUNNER_NOW "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE experiments (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL,
  source_path   TEXT,
  source_text   TEXT,
  source_sha256 TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  UNIQUE (name, source_sha256)
);

CREATE TABLE trials (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  config_json   TEXT NOT NULL,
  config_hash   TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  UNIQUE (experiment_id, config_hash)
);

CREATE TABLE fingerprints (
  id         INTEGER PRIMARY KEY,
  hash       TEXT NOT NULL UNIQUE,
  json       TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(
);

CREATE TABLE runs (
  id             INTEGER PRIMARY KEY,
  trial_id       INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  fingerprint_id INTEGER REFERENCES fingerprints(id),
  repeat_index   INTEGER NOT NULL CHECK (repeat_index >= 0),
  kind           TEXT NOT NULL,
  status         TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'crashed',
                                                 'timeout', 'interrupted', 'diverged')),
  error          TEXT,
  seed           INTEGER NOT NULL,
  rank           INTEGER NOT NULL DEFAULT 0 CHECK (rank >= 0),
  load_average   REAL,
  started_at     TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  finished_at    TEXT,
  heartbeat_at   TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX runs_trial_id ON runs(trial_id);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_fingerprint_id ON runs(fingerprint_id);

CREATE TABLE run_plugins (
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind    TEXT NOT NULL,
  name    TEXT NOT NULL,
  library TEXT NOT NULL,
  version TEXT NOT NULL,
  sha256  TEXT NOT NULL,
  PRIMARY KEY (run_id, kind, name)
);

CREATE TABLE samples (
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step         INTEGER NOT NULL CHECK (step >= 0),
  warmup       INTEGER NOT NULL CHECK (warmup IN (0, 1)),
  wall_ns      REAL,
  data_ns      REAL,
  forward_ns   REAL,
  backward_ns  REAL,
  optimizer_ns REAL,
  loss         REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE summaries (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  metric TEXT NOT NULL,
  unit   TEXT NOT NULL,
  n      INTEGER NOT NULL CHECK (n >= 0),
  mean   REAL,
  stddev REAL,
  min    REAL,
  p50    REAL,
  p90    REAL,
  p99    REAL,
  max    REAL,
  PRIMARY KEY (run_id, metric)
);

CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name   TEXT NOT NULL,
  value  REAL,
  unit   TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);

CREATE VIEW run_overview AS
SELECT r.id            AS run_id,
       e.name          AS experiment,
       r.trial_id      AS trial_id,
       t.config_hash   AS config_hash,
       r.repeat_index  AS repeat_index,
       r.kind          AS kind,
       r.status        AS status,
       r.rank          AS rank,
       r.started_at    AS started_at,
       r.finished_at   AS finished_at,
       round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3) AS duration_s,
       s.p50           AS p50_ns,
       m.value         AS samples_per_s,
       r.error         AS error
FROM runs AS r
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id
LEFT JOIN summaries AS s
  ON s.run_id = r.id AND s.metric = CASE r.kind WHEN 'infer' THEN 'latency' ELSE 'step_time' END
LEFT JOIN metrics AS m ON m.run_id = r.id AND m.name = 'samples_per_s';

CREATE VIEW run_summaries AS
SELECT r.id           AS run_id,
       e.name         AS experiment,
       r.trial_id     AS trial_id,
       t.config_hash  AS config_hash,
       r.repeat_index AS repeat_index,
       r.kind         AS kind,
       r.status       AS status,
       s.metric       AS metric,
       s.unit         AS unit,
       s.n            AS n,
       s.mean         AS mean,
       s.stddev       AS stddev,
       s.min          AS min,
       s.p50          AS p50,
       s.p90          AS p90,
       s.p99          AS p99,
       s.max          AS max
FROM summaries AS s
JOIN runs AS r ON r.id = s.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

// Version 2: trial identity (config hash + plugin hashes) and sweep label;
// runs get pid, signal and a uuid that identifies them across databases
// (merge); the views show the effective status. Dropping the UNIQUE
// (experiment_id, config_hash) constraint needs a table rebuild (SQLite's
// ALTER TABLE cannot drop constraints); runs is rebuilt too so that uuid can
// be NOT NULL UNIQUE. Ids are copied, so every reference stays valid. New
// columns go last, so `SELECT *` positions of version 1 do not move.
//
// v1 runs get a uuid derived from their own content and their id, not a
// random one: the same v1 file migrated twice (in place, or as a temporary
// copy by merge) yields the same uuids, so merging it twice adds nothing.
// runner_sha256() is registered on every connection the store opens; it is
// used only here, never in a view or default, because other SQLite clients
// do not have it.
constexpr const char* kSchemaV2 = R"sql(
DROP VIEW run_overview;
DROP VIEW run_summaries;

CREATE TABLE trials_v2 (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  config_json   TEXT NOT NULL,
  config_hash   TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  identity      TEXT NOT NULL,
  label         TEXT,
  UNIQUE (experiment_id, identity)
);
INSERT INTO trials_v2 (id, experiment_id, config_json, config_hash, created_at, identity, label)
SELECT id, experiment_id, config_json, config_hash, created_at, config_hash, NULL FROM trials;
DROP TABLE trials;
ALTER TABLE trials_v2 RENAME TO trials;
CREATE INDEX trials_config_hash ON trials(config_hash);

CREATE TABLE runs_v2 (
  id             INTEGER PRIMARY KEY,
  trial_id       INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  fingerprint_id INTEGER REFERENCES fingerprints(id),
  repeat_index   INTEGER NOT NULL CHECK (repeat_index >= 0),
  kind           TEXT NOT NULL,
  status         TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'crashed',
                                                 'timeout', 'interrupted', 'diverged')),
  error          TEXT,
  seed           INTEGER NOT NULL,
  rank           INTEGER NOT NULL DEFAULT 0 CHECK (rank >= 0),
  load_average   REAL,
  started_at     TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  finished_at    TEXT,
  heartbeat_at   TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  pid            INTEGER CHECK (pid > 0),
  signal         INTEGER CHECK (signal > 0),
  uuid           TEXT NOT NULL UNIQUE CHECK (length(uuid) = 32),
  CHECK ((status = 'running') = (finished_at IS NULL))
);
INSERT INTO runs_v2 (id, trial_id, fingerprint_id, repeat_index, kind, status, error, seed, rank,
                     load_average, started_at, finished_at, heartbeat_at, pid, signal, uuid)
SELECT r.id, r.trial_id, r.fingerprint_id, r.repeat_index, r.kind, r.status, r.error, r.seed,
       r.rank, r.load_average, r.started_at, r.finished_at, r.heartbeat_at, NULL, NULL,
       substr(runner_sha256('runner-v1-run|' || r.id || '|' || r.trial_id || '|' ||
                            coalesce(t.config_hash, '') || '|' || coalesce(e.source_sha256, '') ||
                            '|' || r.repeat_index || '|' || r.rank || '|' || r.started_at), 1, 32)
FROM runs AS r
LEFT JOIN trials AS t ON t.id = r.trial_id
LEFT JOIN experiments AS e ON e.id = t.experiment_id;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_trial_id ON runs(trial_id);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_fingerprint_id ON runs(fingerprint_id);

CREATE VIEW run_overview AS
SELECT r.id            AS run_id,
       e.name          AS experiment,
       r.trial_id      AS trial_id,
       t.config_hash   AS config_hash,
       r.repeat_index  AS repeat_index,
       r.kind          AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       r.rank          AS rank,
       r.started_at    AS started_at,
       r.finished_at   AS finished_at,
       round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3) AS duration_s,
       s.p50           AS p50_ns,
       m.value         AS samples_per_s,
       r.error         AS error,
       r.status        AS stored_status,
       t.label         AS label,
       t.identity      AS identity,
       r.heartbeat_at  AS heartbeat_at,
       r.pid           AS pid,
       r.signal        AS signal,
       r.uuid          AS uuid
FROM runs AS r
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id
LEFT JOIN summaries AS s
  ON s.run_id = r.id AND s.metric = CASE r.kind WHEN 'infer' THEN 'latency' ELSE 'step_time' END
LEFT JOIN metrics AS m ON m.run_id = r.id AND m.name = 'samples_per_s';

CREATE VIEW run_summaries AS
SELECT r.id           AS run_id,
       e.name         AS experiment,
       r.trial_id     AS trial_id,
       t.config_hash  AS config_hash,
       r.repeat_index AS repeat_index,
       r.kind         AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       s.metric       AS metric,
       s.unit         AS unit,
       s.n            AS n,
       s.mean         AS mean,
       s.stddev       AS stddev,
       s.min          AS min,
       s.p50          AS p50,
       s.p90          AS p90,
       s.p99          AS p99,
       s.max          AS max,
       r.status       AS stored_status,
       t.label        AS label,
       t.identity     AS identity
FROM summaries AS s
JOIN runs AS r ON r.id = s.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

// Version 3 (measurement, issue 4): host-to-device and communication phases
// per sample; p5, p95 and the coefficient of variation per summary; the peak
// FLOP/s measured once per fingerprint, device and dtype. run_summaries gains
// the new statistics (a view, so it is recreated).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE samples ADD COLUMN h2d_ns REAL;
ALTER TABLE samples ADD COLUMN comm_ns REAL;
ALTER TABLE summaries ADD COLUMN p5 REAL;
ALTER TABLE summaries ADD COLUMN p95 REAL;
ALTER TABLE summaries ADD COLUMN cv REAL;

CREATE TABLE peaks (
  fingerprint_id INTEGER NOT NULL REFERENCES fingerprints(id) ON DELETE CASCADE,
  device         TEXT NOT NULL,
  dtype          TEXT NOT NULL,
  flop_per_s     REAL NOT NULL CHECK (flop_per_s > 0),
  method         TEXT NOT NULL,
  measured_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  PRIMARY KEY (fingerprint_id, device, dtype)
);

DROP VIEW run_summaries;
CREATE VIEW run_summaries AS
SELECT r.id           AS run_id,
       e.name         AS experiment,
       r.trial_id     AS trial_id,
       t.config_hash  AS config_hash,
       r.repeat_index AS repeat_index,
       r.kind         AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       s.metric       AS metric,
       s.unit         AS unit,
       s.n            AS n,
       s.mean         AS mean,
       s.stddev       AS stddev,
       s.min          AS min,
       s.p50          AS p50,
       s.p90          AS p90,
       s.p99          AS p99,
       s.max          AS max,
       r.status       AS stored_status,
       t.label        AS label,
       t.identity     AS identity,
       s.p5           AS p5,
       s.p95          AS p95,
       s.cv           AS cv
FROM summaries AS s
JOIN runs AS r ON r.id = s.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

// Version 4 (hardening): claims and exact liveness. While a run is running
// its `claim` is "identity:repeat:rank"; the partial unique index makes a
// second live claim of one repetition impossible, so several runners on one
// store share the plan and run each repetition once. `host`, `boot_id` and
// `pid_start` identify the process that claimed the run beyond its pid (a
// pid is reused; a reboot ends every process), so a dead runner's runs are
// recognised the same way by dry runs and real ones.
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE runs ADD COLUMN claim TEXT;
ALTER TABLE runs ADD COLUMN host TEXT;
ALTER TABLE runs ADD COLUMN boot_id TEXT;
ALTER TABLE runs ADD COLUMN pid_start INTEGER;
CREATE UNIQUE INDEX runs_live_claim ON runs(claim) WHERE status = 'running';
)sql";

// Version 5 (held-out evaluation, weights files): the values of each
// evaluation of a run (every N steps and at the end), and the weights files
// it read ([model] init_from) or wrote ([train] save_to), each with its
// SHA-256 and size so that a later run can tell whether it started from the
// same bytes. Both are written with the verdict (finish_run). Roles are not
// a CHECK list, so that a new role needs no table rebuild. The view
// run_evaluations reads like run_summaries: one row per value, with the
// run's experiment, trial and effective status.
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE evaluations (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step   INTEGER NOT NULL CHECK (step >= 0),
  metric TEXT NOT NULL CHECK (metric <> ''),
  value  REAL,
  PRIMARY KEY (run_id, step, metric)
) WITHOUT ROWID;

CREATE TABLE run_files (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  role   TEXT NOT NULL CHECK (role <> ''),
  path   TEXT NOT NULL CHECK (path <> ''),
  sha256 TEXT NOT NULL CHECK (length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*'),
  bytes  INTEGER NOT NULL CHECK (bytes >= 0),
  skipped TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, role)
);

CREATE VIEW run_evaluations AS
SELECT r.id           AS run_id,
       e.name         AS experiment,
       r.trial_id     AS trial_id,
       t.config_hash  AS config_hash,
       r.repeat_index AS repeat_index,
       r.kind         AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       v.step         AS step,
       v.metric       AS metric,
       v.value        AS value,
       r.status       AS stored_status,
       t.label        AS label,
       t.identity     AS identity
FROM evaluations AS v
JOIN runs AS r ON r.id = v.run_id
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id;
)sql";

// Version 6 (training recipes): what the recipe did at each step: the
// learning rate of the first parameter group ([schedule]), the gradients'
// global norm before clipping ([train] clip_grad_norm), and with amp_fp16
// the loss scale the step used and whether a non-finite gradient skipped its
// optimizer step. NULL where the run had no such thing.
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE samples ADD COLUMN lr REAL;
ALTER TABLE samples ADD COLUMN grad_norm REAL;
ALTER TABLE samples ADD COLUMN loss_scale REAL;
ALTER TABLE samples ADD COLUMN skipped INTEGER CHECK (skipped IN (0, 1));
)sql";

// Version 7 (compiled models): facts about what a run ran, as text (the
// provenance an exported model carries: the torch version that made it, its
// device, its dynamic dimensions), one row per name.
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE run_attributes (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name   TEXT NOT NULL CHECK (name <> ''),
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
)sql";

constexpr int parse_decimal(const char* text) {
  int value = 0;
  for (; *text != '\0'; ++text) value = value * 10 + (*text - '0');
  return value;
}
static_assert(parse_decimal(RUNNER_STALE_SECONDS) == kStaleHeartbeatSeconds,
              "the views' stale threshold must match kStaleHeartbeatSeconds");

// Version 8 (the environment as an experiment variable): the part of the
// fingerprint that joins a trial's identity (library versions, CPU, the
// performance environment variables, the CPUs runs may use), as canonical
// JSON, so that a dry run can say which fields changed since the recorded
// runs. NULL for trials recorded before it.
constexpr const char* kSchemaV8 = R"sql(
ALTER TABLE trials ADD COLUMN environment TEXT;
)sql";

// Version 9 (data-parallel runs on DDP's engine): every rank's time of each
// step, gathered by rank 0: the slowest rank's and the median rank's, so
// stragglers show step by step. NULL outside data-parallel runs.
constexpr const char* kSchemaV9 = R"sql(
ALTER TABLE samples ADD COLUMN rank_max_ns REAL;
ALTER TABLE samples ADD COLUMN rank_median_ns REAL;
)sql";

// Version 10 (kernel experiments): a run may be of kind 'kernel', whose
// headline summary is call_time (the overview's p50_ns); the copy bandwidth
// measured once per fingerprint and device, next to the peak FLOP/s.
constexpr const char* kSchemaV10 = R"sql(
CREATE TABLE peak_bandwidth (
  fingerprint_id INTEGER NOT NULL REFERENCES fingerprints(id) ON DELETE CASCADE,
  device         TEXT NOT NULL,
  bytes_per_s    REAL NOT NULL CHECK (bytes_per_s > 0),
  method         TEXT NOT NULL,
  measured_at    TEXT NOT NULL DEFAULT )sql" RUNNER_NOW R"sql(,
  PRIMARY KEY (fingerprint_id, device)
);

DROP VIEW run_overview;
CREATE VIEW run_overview AS
SELECT r.id            AS run_id,
       e.name          AS experiment,
       r.trial_id      AS trial_id,
       t.config_hash   AS config_hash,
       r.repeat_index  AS repeat_index,
       r.kind          AS kind,
       )sql" RUNNER_EFFECTIVE_STATUS("r") R"sql( AS status,
       r.rank          AS rank,
       r.started_at    AS started_at,
       r.finished_at   AS finished_at,
       round((julianday(r.finished_at) - julianday(r.started_at)) * 86400.0, 3) AS duration_s,
       s.p50           AS p50_ns,
       m.value         AS samples_per_s,
       r.error         AS error,
       r.status        AS stored_status,
       t.label         AS label,
       t.identity      AS identity,
       r.heartbeat_at  AS heartbeat_at,
       r.pid           AS pid,
       r.signal        AS signal,
       r.uuid          AS uuid
FROM runs AS r
JOIN trials AS t ON t.id = r.trial_id
JOIN experiments AS e ON e.id = t.experiment_id
LEFT JOIN summaries AS s
  ON s.run_id = r.id AND s.metric = CASE r.kind WHEN 'infer' THEN 'latency'
                                                WHEN 'kernel' THEN 'call_time'
                                                ELSE 'step_time' END
LEFT JOIN metrics AS m ON m.run_id = r.id AND m.name = 'samples_per_s';
)sql";

// Version 11 (profiler traces): the steps a run recorded under LibTorch's
// profiler ([profile] steps), flagged and excluded from the statistics
// (NULL for rows written before it: not profiled), and the run's operators
// aggregated over those steps. The trace file itself is a run_files row
// with role 'profile_trace'.
constexpr const char* kSchemaV11 = R"sql(
ALTER TABLE samples ADD COLUMN profiled INTEGER CHECK (profiled IN (0, 1));

CREATE TABLE run_ops (
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name          TEXT NOT NULL CHECK (name <> ''),
  input_shapes  TEXT NOT NULL DEFAULT '',
  calls         INTEGER NOT NULL CHECK (calls >= 1),
  self_cpu_ns   INTEGER NOT NULL CHECK (self_cpu_ns >= 0),
  total_cpu_ns  INTEGER NOT NULL CHECK (total_cpu_ns >= self_cpu_ns),
  self_cuda_ns  INTEGER NOT NULL DEFAULT 0 CHECK (self_cuda_ns >= 0),
  total_cuda_ns INTEGER NOT NULL DEFAULT 0 CHECK (total_cuda_ns >= self_cuda_ns),
  PRIMARY KEY (run_id, name, input_shapes)
) WITHOUT ROWID;
)sql";

// Version 12 (run labels): free KEY=VALUE pairs per run (the commit under
// test, the branch), written with the run's claim and never part of a
// trial's identity; the index serves selectors such as label:commit=abc123.
constexpr const char* kSchemaV12 = R"sql(
CREATE TABLE run_labels (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name   TEXT NOT NULL CHECK (name <> ''),
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
) WITHOUT ROWID;
CREATE INDEX run_labels_name_value ON run_labels(name, value);
)sql";

#undef RUNNER_NOW

constexpr std::array<const char*, 12> kMigrations = {
    kSchemaV1, kSchemaV2, kSchemaV3,  kSchemaV4,  kSchemaV5,  kSchemaV6,
    kSchemaV7, kSchemaV8, kSchemaV9, kSchemaV10, kSchemaV11, kSchemaV12};
static_assert(kMigrations.size() == static_cast<std::size_t>(kSchemaVersion),
              "one migration step per schema version");

}  // namespace

const char* migration_step(int version) {
  if (version < 1 || version > kSchemaVersion)
    throw std::out_of_range("no migration step for schema version " + std::to_string(version));
  return kMigrations[static_cast<std::size_t>(version - 1)];
}

}  // namespace runner::store::detail
