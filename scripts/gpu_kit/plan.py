"""The GPU check kit's plan, run by scripts/gpu-check after the build
(docs/gpu.md): the build and bundle checks, `ctest -L gpu`, every check of
checks.PLAN, the report, and OUT/summary.json. Exit 0 when no check failed."""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import PLAN  # noqa: E402
from kit import Fail, Kit, Skip  # noqa: E402

# The GPU machine's 8 minutes, build included; the CPU proof is not timed.
BUDGET_S = {"gpu": 480, "cpu": 3600}
# Packages whose headers a bare build machine has: the C and C++ libraries and the kernel's.
BASE_PACKAGES = re.compile(r"^(libc6-dev|linux-libc-dev|libc-dev|libstdc\+\+-\d+-dev|libgcc-\d+-dev|"
                           r"libcrypt-dev|libnsl-dev|libtirpc-dev|gcc-\d+|g\+\+-\d+|cpp-\d+)(:\w+)?$")


def device_name(kit):
    import torch
    if kit.cuda and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    for line in open("/proc/cpuinfo", encoding="utf-8"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} CPUs)"
    return platform.processor() or "unknown CPU"


def bundle_check(kit, deps):
    """Every header the build read came from the bundle, LibTorch, CUDA or the base system."""
    done = subprocess.run(["ninja", "-C", kit.build, "-t", "deps"], capture_output=True, text=True)
    if done.returncode != 0:
        raise Fail("ninja -t deps failed: " + done.stderr.strip())
    headers = set()
    from_bundle = 0
    deps = os.path.realpath(deps)
    for line in done.stdout.splitlines():
        path = line.strip()
        if not path or path.endswith(")") or ": #deps" in line:
            continue
        # ninja keeps the compiler's spelling: relative to the build folder.
        path = os.path.realpath(os.path.join(kit.build, path))
        if path.startswith(deps + os.sep):
            from_bundle += 1
        elif path.startswith("/usr/include/"):
            headers.add(path)
    figures = {"headers_from_bundle": from_bundle, "system_headers": len(headers)}
    if not headers:
        return figures
    owners = subprocess.run(["dpkg", "-S", *sorted(headers)], capture_output=True, text=True)
    if owners.returncode not in (0, 1):
        raise Skip("dpkg -S cannot say which package owns a header")
    foreign = {}
    for line in owners.stdout.splitlines():
        packages, _, path = line.partition(": ")
        if not any(BASE_PACKAGES.match(p.strip()) for p in packages.split(",")):
            foreign.setdefault(packages.strip(), path)
    if foreign:
        raise Fail("the build read headers the bundle should bring: " +
                   "; ".join(f"{p} ({path})" for p, path in sorted(foreign.items())[:8]))
    return figures


def ctest(kit):
    log = os.path.join(kit.out, "ctest.log")
    done = subprocess.run(["ctest", "--test-dir", kit.build, "-L", "gpu", "--output-on-failure",
                           "--timeout", "300"], capture_output=True, text=True)
    with open(log, "w", encoding="utf-8") as f:
        f.write(done.stdout + done.stderr)
    total = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", done.stdout)
    skipped = len(re.findall(r"\[  SKIPPED \]", done.stdout)) + len(re.findall(r"\*\*\*Skipped", done.stdout))
    figures = {"tests": int(total.group(3)) if total else 0,
               "failed": int(total.group(2)) if total else None, "skipped": skipped}
    if done.returncode != 0 or not total:
        raise Fail(f"ctest -L gpu: {figures['failed']} of {figures['tests']} failed (ctest.log)")
    return figures


def report(kit):
    if not kit.recorded:
        raise Fail("the database holds no experiment to report")
    out = os.path.join(kit.out, "report.html")
    kit.runner("report", *[f"experiment:{n}" for n in kit.recorded], "--db", kit.db, "--out", out,
               timeout=300)
    return {"bytes": os.path.getsize(out), "experiments": len(kit.recorded)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["gpu", "cpu"], required=True)
    for name in ("root", "build", "deps", "out", "python", "work"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--build-seconds", type=float, required=True)
    parser.add_argument("--started-seconds-ago", type=float, default=0)
    args = parser.parse_args()
    started = time.monotonic() - args.started_seconds_ago
    # A fresh database: runs of an earlier invocation would be shared by
    # identity and mix into this one's comparisons.
    for name in ("runner.db", "runner.db-wal", "runner.db-shm", "summary.json", "report.html",
                 "ctest.log", "commands.log"):
        if os.path.lexists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    shutil.rmtree(os.path.join(args.out, "runner.db.traces"), ignore_errors=True)
    shutil.rmtree(os.path.join(args.work, "experiments"), ignore_errors=True)
    kit = Kit(args)
    import torch
    summary = {"device": device_name(kit), "torch_version": torch.__version__, "mode": args.mode,
               "runner": kit.runner_bin, "checks": []}
    if args.mode == "gpu" and not torch.cuda.is_available():
        print("gpu-check: torch.cuda.is_available() is False on this machine: run with --cpu, "
              "or on a machine with a GPU", file=sys.stderr)
        return 2
    kit.recorded = []

    def record(name, fn):
        entry = {"name": name}
        left = BUDGET_S[args.mode] - (time.monotonic() - started)
        t0 = time.monotonic()
        if left < 20:
            entry.update(status="skipped", reason=f"out of time ({BUDGET_S[args.mode]} s budget)")
        else:
            try:
                entry.update(status="passed", figures=fn() or {})
            except Skip as e:
                entry.update(status="skipped", reason=str(e))
            except Fail as e:
                entry.update(status="failed", reason=str(e))
            except Exception as e:  # a defect of the kit itself: keep going, say where
                entry.update(status="failed", reason=f"{type(e).__name__}: {e}",
                             traceback=traceback.format_exc(limit=3))
        entry["seconds"] = round(time.monotonic() - t0, 1)
        summary["checks"].append(entry)
        mark = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}[entry["status"]]
        print(f"gpu-check: {mark} {name} ({entry['seconds']} s)"
              + (f": {entry['reason']}" if "reason" in entry else ""), file=sys.stderr, flush=True)

    record("build", lambda: {"seconds": args.build_seconds})
    record("bundle", lambda: bundle_check(kit, args.deps))
    record("ctest_gpu", lambda: ctest(kit))
    for check in PLAN:
        record(check.__name__, lambda c=check: c(kit))
    kit.recorded = recorded_experiments(kit)
    record("report", lambda: report(kit))

    close_database(kit)
    summary["wall_s"] = round(time.monotonic() - started, 1)
    for status in ("passed", "failed", "skipped"):
        summary[status] = sum(1 for c in summary["checks"] if c["status"] == status)
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print(f"gpu-check: {summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} "
          f"skipped in {summary['wall_s']} s on {summary['device']} (torch {summary['torch_version']}); "
          f"{os.path.join(args.out, 'summary.json')}", file=sys.stderr)
    return 1 if summary["failed"] else 0


def close_database(kit):
    """Folds the write-ahead log into the database: runner's read-only readers
    (report, export) leave -wal and -shm beside it, two more files to bring
    back from a GPU machine. The last connection to close removes them."""
    import sqlite3
    if os.path.exists(kit.db):
        db = sqlite3.connect(kit.db)
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()


def recorded_experiments(kit):
    """The names of the experiments in the kit's database (read-only)."""
    import sqlite3
    if not os.path.exists(kit.db):
        return []
    db = sqlite3.connect(kit.db)
    try:
        return [row[0] for row in db.execute("SELECT name FROM experiments ORDER BY id")]
    finally:
        db.close()


if __name__ == "__main__":
    sys.exit(main())
