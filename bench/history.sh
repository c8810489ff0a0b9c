#!/usr/bin/env bash
# The change points of `runner history` on this machine (docs/method.md,
# "Change points"):
#   1. records REPEATS real runs of three MLP configurations, interleaved:
#      base (batches of 64), step3 (66) and step10 (71), whose step costs
#      about 3 and 10 per cent more than base's (the script prints the
#      measured ratios; widths 264 and 272 instead of 256 cost 7 and 8 %:
#      the matrix kernels' blocking, not the arithmetic, sets the cost);
#   2. hands each run's median step time, in recorded order, to
#      build/bin/runner-history-bench analyse: false alarms on A/A series
#      (30 points x 5 repetitions drawn from base's runs, and base's runs in
#      recorded order), the power of the real steps at 3, 5 and 10
#      repetitions, the smallest step found in 90 % of series;
#   3. fills a store with 10,000 runs through the store API (10
#      configurations x 200 commits x 5 repetitions) and times `runner
#      history --along label:commit` on it.
# The figures depend on the machine and its load: say both with them.
#
# usage: bench/history.sh [--repeats N] [--runner PATH] [--keep]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeats=60
runner="$root/build/bin/runner"
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats="$2"; shift 2 ;;
    --runner) runner="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: bench/history.sh [--repeats N] [--runner PATH] [--keep]" >&2; exit 2 ;;
  esac
done
bench="$(dirname "$runner")/runner-history-bench"
for tool in "$runner" "$bench"; do
  [ -x "$tool" ] || { echo "error: $tool is missing; build it first (scripts/dev build)" >&2; exit 2; }
done
work=$(mktemp -d)
[ "$keep" = 1 ] && echo "scratch folder: $work" >&2 || trap 'rm -rf "$work"' EXIT
cd "$work"

cat > steps.toml <<EOF
[experiment]
name = "steps"
kind = "train"
seed = 0
repeats = $repeats
[device]
type = "cpu"
threads = 1
[model]
plugin = "mlp"
hidden = [256, 256]
[data]
plugin = "synthetic"
shape = [256]
classes = 10
size = 4096
batch_size = 64
[optimizer]
plugin = "sgd"
lr = 0.01
[train]
steps = 300
warmup = 20
[sweep]
"data.batch_size" = [64, 66, 71]
EOF
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
start=$(date +%s)
"$runner" run steps.toml --db runs.db --log-level warn >/dev/null
echo "recorded $((3 * repeats)) runs in $(( $(date +%s) - start )) s; load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$runner" export experiment:steps --db runs.db --what summaries --format json | python3 -c '
import json, sys
names = {64: "base", 66: "step3", 71: "step10"}
rows = [r for r in json.load(sys.stdin) if r["metric"] == "step_time"]
rows.sort(key=lambda r: r["run_id"])
for r in rows:
    print(names[r["data.batch_size"]], r["p50"])' > values.txt
"$bench" analyse values.txt

"$bench" fill scale.db 10 200 5 >/dev/null
start=$(date +%s.%N)
"$runner" history experiment:scale --along label:commit --format json --db scale.db > history.json
end=$(date +%s.%N)
python3 - "$start" "$end" <<'EOF'
import json, sys
h = json.load(open("history.json"))
runs = sum(len(p["runs"]) for s in h["series"] for p in s["points"])
cps = [c["at"] for s in h["series"] for c in s["change_points"]]
print(f"(c) runner history of {runs} runs ({len(h['series'])} series): {float(sys.argv[2]) - float(sys.argv[1]):.2f} s; change points at {sorted(set(cps))}")
EOF
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" >&2
