#!/usr/bin/env python3
"""Custom kernels against ATen, measured by runner (docs/kernels.md).

Runs experiments/custom_kernels.toml (or --experiment FILE) with runner into a
fresh database, in one invocation (so every ratio compares runs of the same
machine state), then prints per case (kernel x shape x buffers):

  p50 call time, GB/s and % of the measured copy bandwidth of each
  implementation (custom, native, eager), the ratio native/custom of the
  p50s (> 1: custom is faster) with its range over the repetitions' pairs,
  and the issue's targets for memory-bound ops beyond the cache: custom at
  least as fast as native, and at least 80 % of copy bandwidth.

usage: bench/kernels.py [--runner PATH] [--experiment FILE] [--db PATH]
                        [--repeats N] [--set KEY=VALUE ...]
Only the standard library; any python3.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner"))
    parser.add_argument("--experiment", default=os.path.join(ROOT, "experiments", "custom_kernels.toml"))
    parser.add_argument("--db", default="")
    parser.add_argument("--repeats", type=int, default=0, help="override experiment.repeats")
    parser.add_argument("--set", action="append", default=[], help="more --set overrides")
    args = parser.parse_args()

    db = args.db or os.path.join(tempfile.mkdtemp(prefix="runner-kernels-"), "kernels.db")
    command = [args.runner, "run", args.experiment, "--db", db]
    if args.repeats:
        command += ["--set", "experiment.repeats=%d" % args.repeats]
    for item in args.set:
        command += ["--set", item]
    load_before = load_average()
    print("$ " + " ".join(command), file=sys.stderr)
    done = subprocess.run(command, stdout=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        sys.exit("runner exited with %d" % done.returncode)

    con = sqlite3.connect(db)
    peak = con.execute("SELECT bytes_per_s FROM peak_bandwidth WHERE device = 'cpu'").fetchone()
    peak = peak[0] if peak else float("nan")
    cpu = con.execute("SELECT json FROM fingerprints LIMIT 1").fetchone()
    fingerprint = json.loads(cpu[0]) if cpu else {}
    cases = {}  # (plugin, shape, dtype, buffers) -> impl -> [(repeat, p50, GB/s, status)]
    for run_id, identity_json, repeat, status in con.execute(
            "SELECT r.id, t.config_json, r.repeat_index, r.status FROM runs AS r "
            "JOIN trials AS t ON t.id = r.trial_id ORDER BY r.id"):
        config = json.loads(identity_json)
        kernel = config["kernel"]
        key = (kernel["plugin"], tuple(kernel["shape"]), kernel["dtype"], kernel["buffers"])
        p50 = con.execute("SELECT p50 FROM summaries WHERE run_id = ? AND metric = 'call_time'",
                          (run_id,)).fetchone()
        bandwidth = con.execute("SELECT value FROM metrics WHERE run_id = ? AND "
                                "name = 'bandwidth_bytes_per_s'", (run_id,)).fetchone()
        buffers = con.execute("SELECT value FROM metrics WHERE run_id = ? AND name = 'buffers'",
                              (run_id,)).fetchone()
        cases.setdefault(key, {}).setdefault(kernel["impl"], []).append(
            (repeat, p50[0] if p50 else None, bandwidth[0] if bandwidth else None, status,
             buffers[0] if buffers else None))

    print("CPU: %s (%s); copy bandwidth %.1f GB/s; load %.2f before, %.2f after" % (
        fingerprint.get("cpu.model", "?"), fingerprint.get("cpu.capability", fingerprint.get("cpu.isa", "?")),
        peak / 1e9, load_before, load_average()))
    print("%-10s %-13s %-8s %4s | %-26s | %-26s | %-26s | %-20s | %s" % (
        "kernel", "shape", "dtype", "bufs", "custom p50  GB/s  %copy", "native p50  GB/s  %copy",
        "eager p50  GB/s  %copy", "native/custom [range]", "targets"))
    for key in cases:
        plugin, shape, dtype, buffers = key
        row = []
        medians = {}
        for impl in ("custom", "native", "eager"):
            runs = [r for r in cases[key].get(impl, []) if r[1] is not None]
            if not runs:
                failed = [r[3] for r in cases[key].get(impl, [])]
                row.append("%-26s" % ("-" if not failed else ",".join(failed)))
                continue
            p50 = statistics.median(r[1] for r in runs)
            gbs = statistics.median(r[2] for r in runs if r[2] is not None)
            medians[impl] = (p50, gbs, {r[0]: r[1] for r in runs}, runs[0][4])
            row.append("%9.3f ms %6.1f %5.0f %%" % (p50 / 1e6, gbs / 1e9, 100 * gbs / peak))
        ratio = "-"
        verdict = ""
        if "custom" in medians and "native" in medians:
            c, n = medians["custom"], medians["native"]
            pairs = [n[2][i] / c[2][i] for i in c[2] if i in n[2]]
            ratio = "%.3f [%.3f, %.3f]" % (n[0] / c[0], min(pairs), max(pairs)) if pairs else "-"
            beyond_cache = c[3] == 1 and buffers == 0
            if beyond_cache:
                fast = n[0] / c[0] >= 1.0
                near_copy = c[1] / peak >= 0.8
                verdict = "%s native, %s 80 %% of copy" % (
                    "at least as fast as" if fast else "SLOWER than", "at least" if near_copy else "BELOW")
            else:
                verdict = "(in cache: %d buffers)" % c[3] if buffers == 0 else "(hot cache, 1 buffer)"
        print("%-10s %-13s %-8s %4s | %s | %-20s | %s" % (
            plugin, "x".join(str(d) for d in shape), dtype, buffers, " | ".join(row), ratio, verdict))
    print("database: %s" % db)


if __name__ == "__main__":
    main()
