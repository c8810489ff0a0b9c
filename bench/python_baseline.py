#!/usr/bin/env python3
"""runner against PyTorch Python eager (and torch.compile) on the same workload.

For each configuration, each round runs three sides, in a rotating order so
machine drift hits them alike, each in a fresh process:

  runner    `runner run` on a generated experiment file (default isolation),
            steps/s = samples_per_s / batch_size read from its database
  eager     the same MLP / data / SGD / batch / thread count in Python eager
  compile   the same with the model wrapped in torch.compile (mode "default";
            the optimizer step stays eager); needs a C++ compiler on the CPU

Python sides time each step with time.perf_counter_ns from before the batch
is drawn to after optimizer.step(), read loss.item() after the clock stops,
and report measured steps / sum of measured step times, as runner does.
The ratio runner/eager is taken per round from those steps/s, and also from
the median step times ("p50"), which preemption by other processes disturbs
far less; both are summarised over the rounds.

Configurations (the default runs the first three):
  quickstart  MLP 32-64-64-10, batch 32, as experiments/quickstart.toml
              (overhead-bound: ~0.1 ms a step, mostly per-operator dispatch)
  medium      MLP 64-256-256-10, batch 64 (the quickstart before; arithmetic
              already dominates its ~0.5-0.9 ms step)
  compute     MLP 1024-2048-2048-10, batch 256 (compute-bound: 0.1-0.17 s a
              step at one thread)
  tiny        MLP 16-32-32-10, batch 8 (pure dispatch overhead; only with
              --configs tiny)

Run with the venv's python (it has torch); nothing is downloaded.
  ~/.cache/runner/venv-torch-2.14.1/bin/python bench/python_baseline.py
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

# The venv has no NumPy; torch warns about it on import. Nothing here uses it.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

CONFIGS = {
    # name: hidden, features, batch, measured steps, warm-up steps
    "quickstart": dict(hidden=[64, 64], features=32, batch=32, steps=3000, warmup=50),
    "medium": dict(hidden=[256, 256], features=64, batch=64, steps=2000, warmup=50),
    "compute": dict(hidden=[2048, 2048], features=1024, batch=256, steps=30, warmup=5),
    # Not run by default: per-op dispatch only, almost no arithmetic.
    "tiny": dict(hidden=[32, 32], features=16, batch=8, steps=3000, warmup=50),
}
CLASSES = 10
SIZE = 4096
SEED = 0
LR = 0.05
MOMENTUM = 0.9
# torch.compile's first steps compile; they are warm-up, never measured.
COMPILE_EXTRA_WARMUP = 5


def worker(side, config, threads, steps, warmup):
    """One Python run in this process; prints a JSON line."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    features, batch = config["features"], config["batch"]
    gen = torch.Generator().manual_seed(SEED)
    inputs = torch.randn(SIZE, features, generator=gen)
    teacher = torch.randn(features, CLASSES, generator=gen)
    targets = (inputs @ teacher).argmax(1)

    layers, width = [], features
    for h in config["hidden"]:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, CLASSES))
    model = torch.nn.Sequential(*layers).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    forward = model
    if side == "compile":
        forward = torch.compile(model)  # mode "default"
        warmup += COMPILE_EXTRA_WARMUP
    loss_fn = torch.nn.functional.cross_entropy

    shuffle = torch.Generator().manual_seed(SEED)
    order = torch.randperm(SIZE, generator=shuffle)
    position = 0
    times = []
    compile_s = None
    for step in range(warmup + steps):
        start = time.perf_counter_ns()
        if SIZE - position < batch:
            order = torch.randperm(SIZE, generator=shuffle)
            position = 0
        idx = order[position:position + batch]
        position += batch
        x = inputs.index_select(0, idx)
        y = targets.index_select(0, idx)
        loss = loss_fn(forward(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        end = time.perf_counter_ns()
        value = loss.item()
        if step == 0:
            compile_s = (end - start) * 1e-9
        if step >= warmup:
            times.append(end - start)
    print(json.dumps({
        "steps_per_s": len(times) / (sum(times) * 1e-9),
        "median_step_ns": statistics.median(times),
        "first_step_s": compile_s,
        "loss_last": value,
        "threads": torch.get_num_threads(),
    }))


def experiment_toml(config, threads, steps, warmup):
    hidden = ", ".join(str(h) for h in config["hidden"])
    return f"""[experiment]
name = "python-baseline"
kind = "train"
seed = {SEED}
repeats = 1

[device]
type = "cpu"
threads = {threads}

[model]
plugin = "mlp"
hidden = [{hidden}]
activation = "relu"

[data]
plugin = "synthetic"
shape = [{config["features"]}]
classes = {CLASSES}
size = {SIZE}
batch_size = {config["batch"]}

[optimizer]
plugin = "sgd"
lr = {LR}
momentum = {MOMENTUM}

[train]
steps = {steps}
warmup = {warmup}
"""


def run_experiment_file(runner, path, db):
    """`runner run PATH` (default isolation: the run in a fresh child process)
    into the database DB; returns the new run's metrics {name: value} and the
    median of each of its summaries {metric: p50}, e.g. "step_time" or
    "latency" and the phases ("data", "forward", ...), in ns. Raises unless the
    run finished."""
    proc = subprocess.run([runner, "run", path, "--db", db, "--force", "--log-level", "error"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"runner exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    con = sqlite3.connect(db)
    try:
        run_id, status, error = con.execute(
            "SELECT id, status, error FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        if status != "finished":
            raise RuntimeError(f"runner's run {run_id} ended {status}: {error}")
        metrics = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ?", (run_id,)))
        p50 = dict(con.execute("SELECT metric, p50 FROM summaries WHERE run_id = ?", (run_id,)))
    finally:
        con.close()
    return metrics, p50


def run_runner(runner, tmp, name, config, threads, steps, warmup):
    path = os.path.join(tmp, f"{name}.toml")
    with open(path, "w") as f:
        f.write(experiment_toml(config, threads, steps, warmup))
    metrics, p50 = run_experiment_file(runner, path, os.path.join(tmp, "runner.db"))
    return {"steps_per_s": metrics["samples_per_s"] / config["batch"],
            "median_step_ns": p50["step_time"]}


def run_json_worker(cmd, timeout):
    """Runs a Python worker command in a fresh process; returns the JSON of its
    last output line. OMP_NUM_THREADS is removed from its environment, so that
    no OpenMP variable overrides torch.set_num_threads."""
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout} s")
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
        raise RuntimeError(" | ".join(lines[-3:]) if lines else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_python(side, name, threads, steps, warmup, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side, "--config", name,
           "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup)]
    return run_json_worker(cmd, timeout)


def rotated(sides, round_index):
    """The sides in round round_index's order: rotated by one each round."""
    k = round_index % len(sides)
    return sides[k:] + sides[:k]


def med_range(values):
    if not values:
        return "n/a"
    return f"{statistics.median(values):.4g} [{min(values):.4g}, {max(values):.4g}]"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def print_table(header, rows):
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runner", default=os.path.join(here, "..", "build", "bin", "runner"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--configs", default="quickstart,medium,compute",
                    help="comma-separated subset of: " + ", ".join(CONFIGS))
    ap.add_argument("--steps", type=int, help="measured steps (default: per configuration)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile side")
    ap.add_argument("--compile-timeout", type=int, default=900, help="seconds per compile run")
    ap.add_argument("--json", help="also write every measurement to this file")
    # Internal: one Python-side run.
    ap.add_argument("--worker", choices=["eager", "compile"], help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        worker(args.worker, CONFIGS[args.config], args.threads, args.steps, args.warmup)
        return

    runner = os.path.abspath(args.runner)
    if not os.access(runner, os.X_OK):
        sys.exit(f"python_baseline.py: {runner} is not an executable (build it, or pass --runner)")
    import torch  # only for the version line
    print(f"torch {torch.__version__} (python), runner {runner}")
    print(f"threads={args.threads} rounds={args.rounds} load at start: {loadavg()}")
    names = [n for n in args.configs.split(",") if n]
    for n in names:
        if n not in CONFIGS:
            sys.exit(f"python_baseline.py: unknown configuration {n!r}")

    sides = ["runner", "eager"] + ([] if args.no_compile else ["compile"])
    record = {"threads": args.threads, "load_start": loadavg(), "configs": {}}
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            config = CONFIGS[name]
            steps = args.steps or config["steps"]
            warmup = config["warmup"]
            print(f"\n== {name}: hidden {config['hidden']}, features {config['features']}, "
                  f"batch {config['batch']}, {steps} measured steps after {warmup} warm-up")
            results = {s: [] for s in sides}
            # "p50" ratios compare median step times, which preemption by
            # other processes disturbs far less than the mean (steps/s).
            ratios = {"runner/eager": [], "runner/compile": [], "compile/eager": [],
                      "runner/eager p50": []}
            compile_error = None
            for r in range(args.rounds):
                order = rotated(sides, r)
                got = {}
                for side in order:
                    if side == "compile" and compile_error:
                        continue
                    try:
                        if side == "runner":
                            got[side] = run_runner(runner, tmp, name, config, args.threads, steps,
                                                   warmup)
                        else:
                            got[side] = run_python(side, name, args.threads, steps, warmup,
                                                   args.compile_timeout)
                    except Exception as e:  # report and go on with the other sides
                        if side == "compile":
                            compile_error = str(e)
                            print(f"  torch.compile does not work here: {compile_error}")
                            continue
                        raise
                    results[side].append(got[side]["steps_per_s"])
                cells = [f"{s} {got[s]['steps_per_s']:9.2f}" for s in sides if s in got]
                if "eager" in got:
                    ratios["runner/eager"].append(got["runner"]["steps_per_s"] /
                                                  got["eager"]["steps_per_s"])
                    ratios["runner/eager p50"].append(got["eager"]["median_step_ns"] /
                                                      got["runner"]["median_step_ns"])
                if "compile" in got:
                    ratios["runner/compile"].append(got["runner"]["steps_per_s"] /
                                                    got["compile"]["steps_per_s"])
                    ratios["compile/eager"].append(got["compile"]["steps_per_s"] /
                                                   got["eager"]["steps_per_s"])
                extra = (f"  (compile first step {got['compile']['first_step_s']:.1f} s)"
                         if "compile" in got else "")
                print(f"  round {r + 1} [{','.join(order)}] steps/s: " + "  ".join(cells) +
                      f"  runner/eager {ratios['runner/eager'][-1]:.3f}"
                      f" (p50 {ratios['runner/eager p50'][-1]:.3f})" + extra +
                      f"  load {loadavg()}")
            record["configs"][name] = {"results": results, "ratios": ratios,
                                       "compile_error": compile_error}
            summary.append((name, results, ratios, compile_error))
    record["load_end"] = loadavg()

    print(f"\nsteps/s and per-round ratios: median [min, max] over {args.rounds} rounds, "
          f"threads={args.threads}, load at end: {loadavg()}")
    header = ["config", "runner", "python eager", "torch.compile", "runner/eager",
              "runner/eager p50", "runner/compile"]
    rows = []
    for name, results, ratios, compile_error in summary:
        rows.append([name, med_range(results["runner"]), med_range(results["eager"]),
                     med_range(results.get("compile", [])) if not compile_error else "failed",
                     med_range(ratios["runner/eager"]), med_range(ratios["runner/eager p50"]),
                     med_range(ratios["runner/compile"])])
    print_table(header, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
