#!/usr/bin/env python3
"""runner merge and the readers at scale: 200 shard databases, 12,000 runs,
about 10 million samples rows (docs/scale.md).

One real shard is made by runner (a small MLP sweep: 3 trials x 2
repetitions), its runs are cloned at the SQL level inside it to
--runs-per-shard (fresh uuids, every row of every run table copied), and that
shard is copied --shards times, each copy given fresh run uuids: every shard
holds runner's own rows, and no two shards share a run. Then, each under
/usr/bin/time -v (wall time and peak resident memory):

  runner merge of the first 50, 100, 200 shards into a new database
  the same merge again into that database (must add nothing)
  runner runs / runs --all, compare trial:1 trial:2, report, export (runs
  and samples) on the merged store of every shard

Nothing is stored in the repository; the work folder holds a few GB.

usage: bench/merge_scale.py [--work DIR] [--shards N] [--runs-per-shard N]
                            [--steps N] [--counts 50,100,200] [--runner PATH] [--keep]
"""
import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPERIMENT = """
[experiment]
name = "scale"
kind = "train"
seed = 0
repeats = 2

[device]
type = "cpu"
threads = 1

[model]
plugin = "mlp"
hidden = [16]

[data]
plugin = "synthetic"
shape = [8]
classes = 4
size = 256
batch_size = 8

[optimizer]
plugin = "sgd"
lr = 0.01

[sweep]
"optimizer.lr" = [0.01, 0.02, 0.05]

[train]
steps = {steps}
warmup = 4
"""


def timed(argv, log):
    """Runs argv under /usr/bin/time -v: (wall s, peak RSS MiB, stdout)."""
    start = time.monotonic()
    proc = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(argv[:6])} ...\n{proc.stderr[-3000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))
    log.write(f"$ {' '.join(argv[:4])} ... ({len(argv)} args)\n{proc.stdout[-2000:]}\n")
    return wall, rss / 1024.0, proc.stdout


def clone_runs(db_path, total):
    """Copies the runs of db_path (every table with a run_id column) until it holds `total`."""
    db = sqlite3.connect(db_path)
    tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
              if t != "runs" and any(c[1] == "run_id" for c in db.execute(f"PRAGMA table_info({t})"))]
    run_columns = [c[1] for c in db.execute("PRAGMA table_info(runs)") if c[1] not in ("id", "uuid")]
    originals = [r for (r,) in db.execute("SELECT id FROM runs ORDER BY id")]
    made = len(originals)
    while made < total:
        for old in originals:
            if made >= total:
                break
            cols = ", ".join(run_columns)
            cur = db.execute(f"INSERT INTO runs ({cols}, uuid) SELECT {cols}, ? FROM runs WHERE id = ?",
                             (uuid.uuid4().hex, old))
            new = cur.lastrowid
            for t in tables:
                others = [c[1] for c in db.execute(f"PRAGMA table_info({t})") if c[1] != "run_id"]
                oc = ", ".join(others)
                db.execute(f"INSERT INTO {t} (run_id, {oc}) SELECT ?, {oc} FROM {t} WHERE run_id = ?",
                           (new, old))
            made += 1
    db.commit()
    db.execute("VACUUM")
    db.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/runner-merge-scale")
    ap.add_argument("--shards", type=int, default=200)
    ap.add_argument("--runs-per-shard", type=int, default=60)
    ap.add_argument("--steps", type=int, default=830, help="measured steps a run (+4 warm-up rows)")
    ap.add_argument("--counts", default="50,100,200")
    ap.add_argument("--runner", default=str(HERE.parent / "build" / "bin" / "runner"))
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    (work / "shards").mkdir(parents=True)
    log = open(work / "log.txt", "w")
    runner = a.runner

    # 1. One real shard, its runs cloned to runs-per-shard.
    exp = work / "scale.toml"
    exp.write_text(EXPERIMENT.format(steps=a.steps))
    template = work / "template.db"
    t0 = time.monotonic()
    subprocess.run([runner, "run", str(exp), "--db", str(template), "--log-level", "warn"],
                   check=True, stdout=subprocess.DEVNULL)
    clone_runs(template, a.runs_per_shard)
    made_s = time.monotonic() - t0
    for i in range(a.shards):
        shard = work / "shards" / f"shard{i:03d}.db"
        shutil.copyfile(template, shard)
        db = sqlite3.connect(shard)
        for (rid,) in db.execute("SELECT id FROM runs").fetchall():
            db.execute("UPDATE runs SET uuid = ? WHERE id = ?", (uuid.uuid4().hex, rid))
        db.commit()
        db.close()
    db = sqlite3.connect(template)
    samples = db.execute("SELECT count(*) FROM samples").fetchone()[0]
    db.close()
    shard_mb = os.path.getsize(template) / 2**20
    print(f"shards: {a.shards} x {a.runs_per_shard} runs x {samples // a.runs_per_shard} samples rows "
          f"= {a.shards * a.runs_per_shard} runs, {a.shards * samples:,} samples rows; "
          f"{shard_mb:.1f} MiB a shard (template made in {made_s:.0f} s)")

    # 2. Merges of 50/100/200 shards, then the same again.
    shards = sorted((work / "shards").glob("*.db"))
    print(f"\n{'shards':>6} {'runs':>6} {'samples':>11} {'merge s':>8} {'peak MiB':>9} "
          f"{'again s':>8} {'peak MiB':>9} {'s/1M rows':>9} {'out MiB':>8}")
    merged = None
    for n in [int(c) for c in a.counts.split(",")]:
        out = work / f"merged{n}.db"
        wall, rss, _ = timed([runner, "merge", *map(str, shards[:n]), "--into", str(out)], log)
        db = sqlite3.connect(out)
        runs, rows = db.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM samples)").fetchone()
        db.close()
        again, again_rss, text = timed([runner, "merge", *map(str, shards[:n]), "--into", str(out)], log)
        db = sqlite3.connect(out)
        runs2, rows2 = db.execute("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM samples)").fetchone()
        db.close()
        if (runs2, rows2) != (runs, rows):
            sys.exit(f"merging the same {n} shards again added rows: {runs}->{runs2}, {rows}->{rows2}")
        print(f"{n:>6} {runs:>6} {rows:>11,} {wall:>8.1f} {rss:>9.0f} {again:>8.1f} {again_rss:>9.0f} "
              f"{wall / rows * 1e6:>9.2f} {os.path.getsize(out) / 2**20:>8.0f}")
        merged = out

    # 3. The readers on the biggest merged store.
    print(f"\nreaders on {merged.name}:")
    print(f"{'command':<44} {'s':>7} {'peak MiB':>9}")
    html = work / "report.html"
    for label, argv in [
        ("runs (50 newest)", ["runs"]),
        ("runs --all", ["runs", "--all"]),
        ("show 1", ["show", "1"]),
        ("compare trial:1 trial:2", ["compare", "trial:1", "trial:2"]),
        ("report experiment:scale", ["report", "experiment:scale", "--out", str(html)]),
        ("report trial:1 trial:2", ["report", "trial:1", "trial:2", "--out", str(html)]),
        ("export experiment:scale (runs, csv)", ["export", "experiment:scale", "--out", str(work / "runs.csv")]),
        ("export experiment:scale --what samples (csv)",
         ["export", "experiment:scale", "--what", "samples", "--out", str(work / "samples.csv")]),
    ]:
        if html.exists():
            html.unlink()
        wall, rss, _ = timed([runner, *argv, "--db", str(merged)], log)
        print(f"{label:<44} {wall:>7.1f} {rss:>9.0f}")
    if not a.keep:
        shutil.rmtree(work / "shards", ignore_errors=True)


if __name__ == "__main__":
    main()
