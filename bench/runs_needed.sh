#!/usr/bin/env bash
# The runs a side needed to detect a 1 %, 5 % and 20 % difference at this
# machine's measured run-to-run spread (docs/method.md "Runs needed at this
# machine's spread"):
#   1. runs experiments/quickstart.toml and experiments/resnet18_cifar.toml
#      with N repetitions each (their shipped steps) in a scratch database;
#   2. takes each run's median step time (step_time p50, the value compare
#      ranks) and their coefficient of variation (sample standard deviation
#      over mean, as compare reports it for a side);
#   3. passes the two spreads to build/bin/runner-runs-needed, which prints
#      the table for the rule `runner compare` applies.
# The spread depends on the machine and its load: say both with the figures.
#
# usage: bench/runs_needed.sh [--repeats N] [--runner PATH] [--keep]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeats=10
runner="$root/build/bin/runner"
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --runner) runner="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: bench/runs_needed.sh [--repeats N] [--runner PATH] [--keep]" >&2; exit 2 ;;
  esac
done
needed="$(dirname "$runner")/runner-runs-needed"
for tool in "$runner" "$needed"; do
  [ -x "$tool" ] || { echo "error: $tool is missing; build it first (scripts/dev build)" >&2; exit 2; }
done
work=$(mktemp -d)
[ "$keep" = 1 ] && echo "scratch folder: $work" >&2 || trap 'rm -rf "$work"' EXIT
cd "$work"

cv_of() {  # the CV of step_time p50 over the runs of experiment $1
  "$runner" export "experiment:$1" --db runs.db --what summaries --format json | python3 -c '
import json, statistics, sys
p50 = [r["p50"] for r in json.load(sys.stdin) if r["metric"] == "step_time"]
print(f"{statistics.stdev(p50) / statistics.fmean(p50):.4f} {len(p50)} {statistics.median(p50):.0f}")'
}

args=()
for name in quickstart resnet18_cifar; do
  "$runner" run "$root/experiments/$name.toml" --db runs.db --log-level warn \
    --set "experiment.repeats=$repeats" >/dev/null
  read -r cv n median <<<"$(cv_of "$name")"
  echo "$name: $n runs, median step $median ns, run-to-run CV $cv" >&2
  args+=("$name=$cv")
done
echo "load average while measuring: $(cut -d' ' -f1-3 /proc/loadavg); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" >&2
"$needed" "${args[@]}"
