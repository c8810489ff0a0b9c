#!/usr/bin/env bash
# Cost of `runner validate` against the number of trials: peak memory (RSS)
# and wall time at 1k, 10k and 100k trials, written as [[trial]] tables and
# as one [sweep] axis, next to `runner --version` (the cost of loading
# LibTorch, which every command pays). Work must be linear in the input
# (docs/experiment.md#limits); this prints the curve for docs/benchmarks.md.
#
# usage: bench/validate_scaling.sh [--runner PATH] [--rounds N] [--sizes "1000 10000 100000"]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNNER="$ROOT/build/bin/runner"
ROUNDS=3
SIZES="1000 10000 100000"
while [ $# -gt 0 ]; do
  case "$1" in
    --runner) RUNNER="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

base() {
  printf '[model]\nplugin = "mlp"\n[data]\nplugin = "synthetic"\n[optimizer]\nplugin = "sgd"\n[train]\nsteps = 10\n'
}

# Writes the experiment of `kind` (trials|sweep) with n trials to stdout.
experiment() {
  local kind="$1" n="$2"
  base
  if [ "$kind" = trials ]; then
    awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "[[trial]]\n\"optimizer.lr\" = %.9f\n", 0.0001 + i * 1e-9 }'
  else
    awk -v n="$n" 'BEGIN { printf "[sweep]\n\"optimizer.lr\" = ["; for (i = 0; i < n; i++) printf "%s%.9f", (i ? ", " : ""), 0.0001 + i * 1e-9; printf "]\n" }'
  fi
}

# Median wall time and largest peak RSS of ROUNDS runs of a command.
measure() {
  local times=() peak=0
  for _ in $(seq "$ROUNDS"); do
    local out
    /usr/bin/time -o "$WORK/time" -f '%e %M' "$@" >/dev/null 2>&1 || true
    out=$(tail -1 "$WORK/time")
    times+=("${out% *}")
    local kb="${out#* }"
    [ "$kb" -gt "$peak" ] && peak="$kb"
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  printf '%s %s' "$median" "$((peak / 1024))"
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r t m <<<"$(measure "$RUNNER" --version)"
printf '%-8s %-7s %10s %8s %10s\n' form trials "file KiB" "time s" "peak MiB"
printf '%-8s %-7s %10s %8s %10s\n' baseline - - "$t" "$m"
for n in $SIZES; do
  for kind in trials sweep; do
    file="$WORK/$kind-$n.toml"
    experiment "$kind" "$n" >"$file"
    read -r t m <<<"$(measure "$RUNNER" validate "$file")"
    printf '%-8s %-7s %10s %8s %10s\n' "$kind" "$n" "$(( $(stat -c %s "$file") / 1024 ))" "$t" "$m"
  done
done
