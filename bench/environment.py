#!/usr/bin/env python3
"""The environment as an experiment variable, measured (docs/environment.md).

Two studies, each with runner's own database as the record:

overhead   what a run whose environment differs from runner's costs: the same
           quickstart-sized trial run by a forked run process (the default)
           and by a fresh, exec'd one ([env] sets a variable runner does not
           have). Rounds alternate the order of the two. Per run it reads
           time_to_first_step_s (from the scheduler's start of the run to the
           first step: fork or exec, plugin loading, set-up) of every run but
           an invocation's first, and per invocation the wall time per run.
aa         A/A comparisons: two copies of one experiment (aa_a, aa_b, the same
           configuration), --repeats runs a side, compared with
           `runner compare experiment:aa_a experiment:aa_b`, run two ways:
           sequential (two invocations, one file after the other) and
           interleaved (one invocation, `runner run aa_a.toml aa_b.toml`,
           A1 B1 A2 B2 ...). Counts, per way, the pairs whose step_time was
           called significantly different (the statistical test alone), the
           pairs called faster or slower against the default margin, the
           pairs where --fail-above 10 would fire, and the pairs flagged as
           separate blocks.

usage: bench/environment.py [overhead|aa|both] [--runner PATH] [--rounds N]
                            [--pairs N] [--repeats N] [--steps N] [--keep DIR]
Only the standard library; any python3.
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

EXPERIMENT = """[experiment]
name = "{name}"
kind = "train"
seed = 0
repeats = {repeats}

[device]
type = "cpu"
threads = 1

[model]
plugin = "mlp"
hidden = [64, 64]

[data]
plugin = "synthetic"
shape = [32]
classes = 10
size = 4096
batch_size = 32

[optimizer]
plugin = "sgd"
lr = 0.05
momentum = 0.9

[train]
steps = {steps}
warmup = 20
{extra}"""


def write(folder, name, repeats, steps, extra=""):
    path = os.path.join(folder, name + ".toml")
    with open(path, "w") as f:
        f.write(EXPERIMENT.format(name=name, repeats=repeats, steps=steps, extra=extra))
    return path


def run(runner, args, db):
    t0 = time.perf_counter()
    done = subprocess.run([runner, *args, "--db", db], capture_output=True, text=True)
    if done.returncode not in (0,):
        sys.exit(f"environment.py: runner {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return time.perf_counter() - t0, done.stdout


def cpu_line():
    model = "?"
    isa = []
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not isa:
                flags = line.split(":", 1)[1].split()
                isa = [x for x in ("avx512f", "avx2") if x in flags][:1]
    return f"{model}, {os.cpu_count()} CPUs, {isa[0] if isa else 'no AVX2'}, load {os.getloadavg()[0]:.2f}"


def overhead(args, folder):
    db = os.path.join(folder, "overhead.db")
    fork = write(folder, "fork_path", args.repeats, args.steps)
    fresh = write(folder, "fresh_path", args.repeats, args.steps,
                  '[env]\nBENCH_FRESH_PROCESS = "1"\n')
    firsts = {"fork": [], "fresh": []}
    walls = {"fork": [], "fresh": []}
    for r in range(args.rounds):
        order = [("fork", fork), ("fresh", fresh)]
        if r % 2:
            order.reverse()
        for side, path in order:
            wall, _ = run(args.runner, ["run", path, "--force"], db)
            walls[side].append(wall / args.repeats)
    con = sqlite3.connect(db)
    for side, name in (("fork", "fork_path"), ("fresh", "fresh_path")):
        rows = con.execute(
            "SELECT m.value FROM metrics m JOIN runs r ON r.id = m.run_id JOIN trials t ON "
            "t.id = r.trial_id JOIN experiments e ON e.id = t.experiment_id WHERE e.name = ? AND "
            "m.name = 'time_to_first_step_s' AND r.repeat_index > 0 AND r.status = 'finished'",
            (name,)).fetchall()
        firsts[side] = [v for (v,) in rows]
    fork_first = statistics.median(firsts["fork"])
    fresh_first = statistics.median(firsts["fresh"])
    print(f"# overhead: {args.rounds} rounds x {args.repeats} runs a side, {args.steps} steps; {cpu_line()}")
    print(f"time to first step (median of {len(firsts['fork'])} / {len(firsts['fresh'])} runs): "
          f"fork {fork_first * 1e3:.0f} ms, fresh process {fresh_first * 1e3:.0f} ms, "
          f"difference {(fresh_first - fork_first) * 1e3:.0f} ms, ratio {fresh_first / fork_first:.2f}")
    fork_wall = statistics.median(walls["fork"])
    fresh_wall = statistics.median(walls["fresh"])
    print(f"wall time per run (median over invocations): fork {fork_wall:.3f} s, fresh {fresh_wall:.3f} s, "
          f"ratio {fresh_wall / fork_wall:.2f}")
    return {"fork_first_s": fork_first, "fresh_first_s": fresh_first,
            "fork_wall_s": fork_wall, "fresh_wall_s": fresh_wall}


def aa(args, folder):
    counts = {mode: {"significant": 0, "called": 0, "fail_above_10": 0, "blocks": 0, "ratios": []}
              for mode in ("sequential", "interleaved")}
    for p in range(args.pairs):
        for mode in ("sequential", "interleaved") if p % 2 == 0 else ("interleaved", "sequential"):
            db = os.path.join(folder, f"aa-{p}-{mode}.db")
            a = write(folder, "aa_a", args.repeats, args.steps)
            b = write(folder, "aa_b", args.repeats, args.steps)
            if mode == "sequential":
                run(args.runner, ["run", a, "--force"], db)
                run(args.runner, ["run", b, "--force"], db)
            else:
                run(args.runner, ["run", a, b, "--force"], db)
            _, out = run(args.runner, ["compare", "experiment:aa_a", "experiment:aa_b",
                                       "--format", "json"], db)
            result = json.loads(out)
            step = next(m for m in result["metrics"] if m["metric"] == "step_time")
            c = counts[mode]
            c["significant"] += step["significant"]
            c["called"] += step["verdict"] in ("faster", "slower")
            # --fail-above 10 fires on B (or, swapped, on A): significant and
            # the whole interval more than 10 % away.
            c["fail_above_10"] += step["significant"] and (step["ci_lower"] > 1.10 or
                                                           step["ci_upper"] < 1 / 1.10)
            c["blocks"] += result["schedule"]["separate_blocks"]
            c["ratios"].append(step["ratio"])
    print(f"# A/A: {args.pairs} pairs x {args.repeats} runs a side, {args.steps} steps; {cpu_line()}")
    for mode, c in counts.items():
        spread = max(abs(r - 1) for r in c["ratios"]) * 100
        print(f"{mode:11s}: significant {c['significant']}/{args.pairs}, called faster/slower "
              f"{c['called']}/{args.pairs}, beyond 10 % {c['fail_above_10']}/{args.pairs}, "
              f"flagged as blocks {c['blocks']}/{args.pairs}; largest |B/A - 1| {spread:.1f}%")
    return {mode: {k: v for k, v in c.items()} for mode, c in counts.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", nargs="?", default="both", choices=["overhead", "aa", "both"])
    parser.add_argument("--runner", default=os.path.join(HERE, "..", "build", "bin", "runner"))
    parser.add_argument("--rounds", type=int, default=5, help="overhead: invocations per path")
    parser.add_argument("--pairs", type=int, default=12, help="aa: A/A pairs per way")
    parser.add_argument("--repeats", type=int, default=6, help="runs a side")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--keep", help="keep the databases in this folder")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if not os.access(args.runner, os.X_OK):
        sys.exit(f"environment.py: {args.runner} not found (build it first)")
    folder = args.keep or tempfile.mkdtemp(prefix="runner-environment-")
    os.makedirs(folder, exist_ok=True)
    figures = {}
    try:
        if args.study in ("overhead", "both"):
            figures["overhead"] = overhead(args, folder)
        if args.study in ("aa", "both"):
            figures["aa"] = aa(args, folder)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
