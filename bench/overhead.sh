#!/usr/bin/env bash
# Instrumentation overhead of runner against the bare LibTorch loop.
#
# Runs the quickstart workload (MLP 32-64-64-10, batch 32, SGD, 1 thread;
# other sizes with --hidden/--batch/--features) three ways, alternating
# within each round so machine drift hits all three alike:
#   bare    build/bin/runner-bare-loop
#   none    runner run --isolate none   (the run in the CLI process)
#   proc    runner run                  (default: the run in a child process)
# The order of the three rotates from round to round. Per round it prints the
# ratio runner/bare of five per-step costs, then the median and range over
# the rounds:
#   mean    runner: batch / samples_per_s     bare: sum of step times / steps
#   p50     runner: summaries p50 step_time   bare: median step time
#   p10     10th percentile of measured step times (runner: from its samples
#           table, nearest rank; bare: interpolated)
#   min     fastest measured step (the least disturbed by other processes)
#   loop    runner: (run_s - setup_s) / (warmup + steps), i.e. everything in
#           the loop, bookkeeping between steps included
#           bare:   whole loop wall time / (warmup + steps)
# A ratio of 1.010 is 1 % overhead.
#
# The bookkeeping itself is measured directly by build/bin/runner-bookkeeping;
# this end-to-end ratio is the cross-check (docs/benchmarks.md).
#
# usage: bench/overhead.sh [--rounds N] [--steps N] [--warmup N] [--threads N]
#                          [--hidden A,B] [--batch N] [--features N]
#                          [--runner PATH] [--bare PATH] [--keep]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${here}/../build/bin"
runner="${build}/runner"
bare="${build}/runner-bare-loop"
rounds=7
steps=2000
warmup=50
threads=1
hidden=64,64
batch=32
features=32
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --features) features="$2"; shift 2 ;;
    --runner) runner="$2"; shift 2 ;;
    --bare) bare="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "overhead.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for exe in "$runner" "$bare"; do
  [[ -x "$exe" ]] || { echo "overhead.sh: $exe not found (build it first)" >&2; exit 2; }
done
command -v sqlite3 >/dev/null || { echo "overhead.sh: needs the sqlite3 command" >&2; exit 2; }

tmp="$(mktemp -d)"
if [[ $keep -eq 0 ]]; then trap 'rm -rf "$tmp"' EXIT; else echo "keeping $tmp"; fi
cat > "$tmp/overhead.toml" <<TOML
[experiment]
name = "overhead"
kind = "train"
seed = 0
repeats = 1

[device]
type = "cpu"
threads = ${threads}

[model]
plugin = "mlp"
hidden = [${hidden}]
activation = "relu"

[data]
plugin = "synthetic"
shape = [${features}]
classes = 10
size = 4096
batch_size = ${batch}

[optimizer]
plugin = "sgd"
lr = 0.05
momentum = 0.9

[train]
steps = ${steps}
warmup = ${warmup}
TOML

total=$((steps + warmup))
db="$tmp/runner.db"

# Prints "mean_ns p50_ns p10_ns min_ns loop_ns" for one side.
run_bare() {
  local out
  out="$("$bare" --steps "$steps" --warmup "$warmup" --threads "$threads" --hidden "$hidden" \
         --batch "$batch" --features "$features")"
  awk -F= '/^mean_step_ns=/{m=$2} /^median_step_ns=/{p=$2} /^p10_step_ns=/{q=$2}
           /^min_step_ns=/{n=$2} /^loop_ns_per_step=/{l=$2} END{print m, p, q, n, l}' <<<"$out"
}
run_runner() {  # $1: none or process
  "$runner" run "$tmp/overhead.toml" --db "$db" --force --isolate "$1" --log-level error >/dev/null
  local id
  id="$(sqlite3 "$db" "SELECT max(id) FROM runs WHERE status = 'finished'")"
  sqlite3 -separator ' ' "$db" "
    SELECT $batch * 1e9 / (SELECT value FROM metrics WHERE run_id = $id AND name = 'samples_per_s'),
           (SELECT p50 FROM summaries WHERE run_id = $id AND metric = 'step_time'),
           (SELECT wall_ns FROM samples WHERE run_id = $id AND warmup = 0 ORDER BY wall_ns
              LIMIT 1 OFFSET (SELECT CAST((count(*) - 1) * 0.1 AS INTEGER) FROM samples
                              WHERE run_id = $id AND warmup = 0)),
           (SELECT min FROM summaries WHERE run_id = $id AND metric = 'step_time'),
           ((SELECT value FROM metrics WHERE run_id = $id AND name = 'run_s') -
            (SELECT value FROM metrics WHERE run_id = $id AND name = 'setup_s')) * 1e9 / $total"
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)   hidden=$hidden batch=$batch features=$features threads=$threads steps=$steps warmup=$warmup rounds=$rounds"
printf '%-5s %-17s %8s   %-34s   %-34s\n' round order "bare p50" \
  "none/bare: mean p50 p10 min loop" "proc/bare: mean p50 p10 min loop"
sides=(bare none process)
: > "$tmp/ratios"
for ((r = 0; r < rounds; ++r)); do
  declare -A res=()
  order=()
  for ((k = 0; k < 3; ++k)); do order+=("${sides[$(((r + k) % 3))]}"); done
  for side in "${order[@]}"; do
    if [[ $side == bare ]]; then res[$side]="$(run_bare)"; else res[$side]="$(run_runner "$side")"; fi
  done
  line="$(echo "${res[bare]} ${res[none]} ${res[process]}" | awk '{
    for (i = 1; i <= 5; ++i) printf "%.4f ", $(5 + i) / $i
    for (i = 1; i <= 5; ++i) printf "%.4f%s", $(10 + i) / $i, i < 5 ? " " : ""
  }')"
  echo "$line" >> "$tmp/ratios"
  bp="$(echo "${res[bare]}" | awk '{printf "%.1fus", $2 / 1000}')"
  printf '%-5s %-17s %8s   %s   %s\n' "$((r + 1))" "$(IFS=,; echo "${order[*]}")" "$bp" \
    "$(cut -d' ' -f1-5 <<<"$line")" "$(cut -d' ' -f6-10 <<<"$line")"
  unset res
done

echo
echo "ratio runner/bare over $rounds rounds: median [min, max]   (1.010 = 1 % overhead)"
names=("none mean" "none p50" "none p10" "none min" "none loop"
       "proc mean" "proc p50" "proc p10" "proc min" "proc loop")
for col in $(seq 1 10); do
  cut -d' ' -f"$col" "$tmp/ratios" | sort -g | awk -v name="${names[$((col - 1))]}" '
    {v[NR] = $1}
    END {
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "  %-10s %.4f  [%.4f, %.4f]\n", name, m, v[1], v[NR]
    }'
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
