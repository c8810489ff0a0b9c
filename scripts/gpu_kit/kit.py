"""What the GPU check kit's checks share (scripts/gpu-check, docs/gpu.md):
running runner, reading what it recorded, and the record of each check."""
import json
import os
import subprocess
import time


class Skip(Exception):
    """A check that cannot run here; str() says why."""


class Fail(Exception):
    """A check that ran and did not hold; str() says what was wrong."""


class Kit:
    """One invocation: the runner built by the kit, its database, the output folder."""

    def __init__(self, args):
        self.mode = args.mode                      # "gpu" or "cpu"
        self.cuda = args.mode == "gpu"
        self.device = "cuda" if self.cuda else "cpu"
        self.root = args.root
        self.build = args.build
        self.python = args.python
        self.out = args.out
        self.runner_bin = os.path.join(args.build, "bin", "runner")
        self.db = os.path.join(args.out, "runner.db")
        # Experiment files and models stay out of OUT, which travels back (8 files at most).
        self.work = args.work
        self.experiments = os.path.join(args.work, "experiments")
        os.makedirs(self.experiments, exist_ok=True)
        self.log = open(os.path.join(args.out, "commands.log"), "a", encoding="utf-8")

    def command(self, argv, timeout=300, env=None):
        """Runs argv, logs it and its output; returns the CompletedProcess."""
        started = time.monotonic()
        self.log.write("$ " + " ".join(argv) + "\n")
        self.log.flush()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=env, cwd=self.out)
        except subprocess.TimeoutExpired:
            self.log.write(f"(killed after {timeout} s)\n")
            raise Fail(f"{os.path.basename(argv[0])} {argv[1] if len(argv) > 1 else ''} "
                       f"did not finish within {timeout} s")
        self.log.write(done.stdout + done.stderr)
        self.log.write(f"(exit {done.returncode}, {time.monotonic() - started:.1f} s)\n\n")
        self.log.flush()
        return done

    def runner(self, *argv, timeout=300, check=True):
        done = self.command([self.runner_bin, *argv], timeout=timeout)
        if check and done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
            raise Fail(f"runner {argv[0]} exited {done.returncode}: " + " | ".join(last))
        return done

    def run_experiment(self, name, text, timeout=300):
        """Writes experiments/NAME.toml and runs it into the kit's database."""
        path = os.path.join(self.experiments, name + ".toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        self.runner("run", path, "--db", self.db, timeout=timeout, check=False)
        runs = self.export(name)
        if not runs:
            raise Fail(f"experiment {name} recorded no run (see commands.log)")
        bad = [r for r in runs if r["status"] != "finished"]
        if bad:
            r = bad[0]
            raise Fail(f"{len(bad)} of {len(runs)} runs not finished; run {r['run_id']} "
                       f"{r['status']}: {r['error']}")
        return runs

    def export(self, name, what="runs"):
        done = self.runner("export", "experiment:" + name, "--db", self.db, "--what", what,
                           "--format", "json", check=False)
        if done.returncode != 0:
            return []
        return json.loads(done.stdout or "[]")

    def metrics(self, name):
        """{run_id: {metric: value}} of experiment NAME."""
        table = {}
        for row in self.export(name, "metrics"):
            table.setdefault(row["run_id"], {})[row["name"]] = row["value"]
        return table

    def compare(self, name, by, baseline, versus, where=()):
        """runner compare's JSON of B/A by KEY: {metric: {ratio, ci, p, verdict}}."""
        argv = ["compare", "experiment:" + name, "--by", by, "--baseline", baseline,
                "--versus", versus, "--format", "json", "--db", self.db]
        for w in where:
            argv += ["--where", w]
        done = self.runner(*argv)
        result = {}
        for m in json.loads(done.stdout)["metrics"]:
            result[m["metric"]] = {
                "ratio": m.get("ratio"),
                "ci": [m.get("ci_lower"), m.get("ci_upper")],
                "p": m.get("p_value"),
                "verdict": m.get("verdict"),
            }
        return result


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def by_key(runs, metrics, key, metric):
    """{value of KEY: median of METRIC over its runs}."""
    from checks import value_of
    groups = {}
    for r in runs:
        value = metrics.get(r["run_id"], {}).get(metric)
        groups.setdefault(value_of(r, key), []).append(value)
    return {k: median(v) for k, v in groups.items()}
