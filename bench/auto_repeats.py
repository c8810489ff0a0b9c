#!/usr/bin/env python3
"""repeats = "auto" measured (docs/method.md, "Repetitions that stop when the
answer is known"). A benchmark, not a test: it runs for tens of minutes and
prints the figures the docs quote, with the CPU and the load around them.

(a) A/A error: `--aa N` whole checks (default 40) of two identical kernel
    trials (built-in `scale`, factor 2 against 3: the same work) with the
    claim "B is 10 % faster" (ratio_below 0.9), each in a fresh database with
    repeats = "auto" (3 to 30): how often it holds (must be at most 5 %), how
    often it is refuted (the right answer), and the rounds it took.
(b) A clear effect: an MLP 4x larger (hidden [256, 256] against [512, 512],
    3.7x the parameters) with the claim "the larger takes 1.5x longer a
    step": the rounds auto took, and its wall time against a fixed 30 repeats
    of the same file, as a ratio.
(c) Time to a verdict against a fixed design at equal error (alpha 0.05 for
    both: the fixed design's one look at compare's interval, auto's every
    look together) on three catalogue claims, cut to a short run with --set:
    auto (max_repeats = --max) against repeats = --max fixed, wall time and
    verdicts of each.

usage: bench/auto_repeats.py [--runner PATH] [--aa N] [--max N] [--only a|b|c] [--keep]
"""
import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

AA = """[experiment]
name = "aa"
kind = "kernel"
repeats = "auto"
[device]
type = "cpu"
threads = 1
[kernel]
plugin = "scale"
shape = [256, 256]
calls = 20
warmup = 2
buffers = 1
[sweep]
"kernel.factor" = [2.0, 3.0]
[[expect]]
claim = "B is 10 % faster (it is the same work)"
metric = "call_time"
by = "kernel.factor"
baseline = 2.0
versus = 3.0
ratio_below = 0.9
"""

CLEAR = """[experiment]
name = "clear"
kind = "train"
repeats = {repeats}
[device]
type = "cpu"
threads = 1
[model]
plugin = "mlp"
hidden = [256, 256]
[data]
plugin = "synthetic"
shape = [32]
classes = 10
size = 1024
batch_size = 32
[optimizer]
plugin = "sgd"
lr = 0.05
[train]
steps = 50
warmup = 5
[sweep]
"model.hidden" = [[256, 256], [512, 512]]
[[expect]]
claim = "an MLP 4x larger takes at least 1.5x longer a step"
metric = "step_time"
by = "model.hidden"
baseline = [256, 256]
versus = [512, 512]
ratio_above = 1.5
"""

# Three catalogue claims, each cut to a short run (the verdicts are of the
# short runs, not of the shipped settings).
CLAIMS = [
    ("claims/custom_op.toml", ["kernel.calls=50", "kernel.warmup=5"]),
    ("claims/accumulation.toml", ["train.steps=20"]),
    ("claims/startup.toml", ["train.steps=2", "train.warmup=1"]),
]

AUTO_LINE = re.compile(r'repeats = "auto": (.*)')


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def finished_runs(db):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(*) FROM runs WHERE status = 'finished'").fetchone()[0]


def run(runner, path, db, sets=()):
    """runner run PATH; returns (wall seconds, the auto line or '')."""
    args = [runner, "run", path, "--db", db, "--log-level", "warn"]
    for s in sets:
        args += ["--set", s]
    t0 = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode not in (0,):
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"runner run {path} failed with {p.returncode}")
    m = AUTO_LINE.search(p.stdout)
    return wall, (m.group(1) if m else "")


def verdicts(runner, path, db, sets=()):
    """The verdicts runner check --no-run gives, in file order."""
    args = [runner, "check", path, "--db", db, "--no-run", "--format", "json"]
    for s in sets:
        args += ["--set", s]
    p = subprocess.run(args, capture_output=True, text=True)
    try:
        return [e["verdict"] for e in json.loads(p.stdout)["expectations"]]
    except (ValueError, KeyError):
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"runner check {path} gave no verdicts ({p.returncode})")


def decided(line):
    """(holds, refuted, rounds) from the auto line."""
    m = re.search(r"after (\d+) round\(s\): (\d+) of (\d+) expectation\(s\) decided \((\d+) holds, (\d+) refuted\)", line)
    if not m:
        return None
    return int(m.group(4)), int(m.group(5)), int(m.group(1))


def part_a(runner, work, n):
    path = os.path.join(work, "aa.toml")
    with open(path, "w") as f:
        f.write(AA)
    holds = refuted = 0
    rounds = []
    t0 = time.monotonic()
    loads = [load()]
    for i in range(n):
        db = os.path.join(work, f"aa{i}.db")
        _, line = run(runner, path, db)
        h, r, k = decided(line) or (0, 0, finished_runs(db) // 2)
        holds += h
        refuted += r
        rounds.append(k)
    loads.append(load())
    print(f"(a) A/A, claim 'B is 10 % faster' (ratio_below 0.9), {n} checks with repeats = \"auto\" (3 to 30):")
    print(f"    holds {holds}/{n} ({100 * holds / n:.1f} %), refuted {refuted}/{n}, undecided {n - holds - refuted}/{n}")
    print(f"    rounds: min {min(rounds)}, median {sorted(rounds)[len(rounds) // 2]}, max {max(rounds)}; "
          f"{time.monotonic() - t0:.0f} s; load {loads[0]} -> {loads[1]}")


def part_b(runner, work):
    auto_path = os.path.join(work, "clear_auto.toml")
    fixed_path = os.path.join(work, "clear_fixed.toml")
    with open(auto_path, "w") as f:
        f.write(CLEAR.format(repeats='"auto"'))
    with open(fixed_path, "w") as f:
        f.write(CLEAR.format(repeats=30))
    l0 = load()
    auto_wall, line = run(runner, auto_path, os.path.join(work, "clear_auto.db"))
    fixed_wall, _ = run(runner, fixed_path, os.path.join(work, "clear_fixed.db"))
    fixed_verdict = verdicts(runner, fixed_path, os.path.join(work, "clear_fixed.db"))
    print("(b) clear effect, MLP [256, 256] against [512, 512], claim ratio_above 1.5 on step_time:")
    print(f"    auto: {line}; {auto_wall:.1f} s")
    print(f"    fixed 30 repeats: {fixed_verdict}; {fixed_wall:.1f} s")
    print(f"    auto / fixed wall time: {auto_wall / fixed_wall:.3f}; load {l0} -> {load()}")


def part_c(runner, work, most):
    print(f"(c) time to a verdict, auto (3 to {most}) against a fixed {most} repeats, alpha 0.05 each:")
    for claim, sets in CLAIMS:
        path = os.path.join(ROOT, claim)
        l0 = load()
        auto_db, fixed_db = os.path.join(work, "c_auto.db"), os.path.join(work, "c_fixed.db")
        for db in (auto_db, fixed_db):
            if os.path.exists(db):
                os.remove(db)
        auto_sets = list(sets) + ['experiment.repeats="auto"', f"experiment.max_repeats={most}"]
        auto_wall, line = run(runner, path, auto_db, auto_sets)
        fixed_sets = list(sets) + [f"experiment.repeats={most}"]
        fixed_wall, _ = run(runner, path, fixed_db, fixed_sets)
        fixed_verdict = verdicts(runner, path, fixed_db, fixed_sets)
        print(f"    {claim} (--set {' '.join(sets)}):")
        print(f"      auto: {line}; {finished_runs(auto_db)} runs, {auto_wall:.1f} s")
        print(f"      fixed: {fixed_verdict}; {finished_runs(fixed_db)} runs, {fixed_wall:.1f} s")
        print(f"      auto / fixed wall time: {auto_wall / fixed_wall:.3f}; load {l0} -> {load()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner"))
    ap.add_argument("--aa", type=int, default=40)
    ap.add_argument("--max", type=int, default=10)
    ap.add_argument("--only", choices=["a", "b", "c"])
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not os.access(args.runner, os.X_OK):
        raise SystemExit(f"error: {args.runner} is missing; build it first (scripts/dev build)")
    work = tempfile.mkdtemp(prefix="runner-auto-repeats-")
    print(f"CPU: {cpu()}, {os.cpu_count()} vCPUs; load average at start {load()}")
    try:
        if args.only in (None, "a"):
            part_a(args.runner, work, args.aa)
        if args.only in (None, "b"):
            part_b(args.runner, work)
        if args.only in (None, "c"):
            part_c(args.runner, work, args.max)
    finally:
        if args.keep:
            print(f"scratch folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
