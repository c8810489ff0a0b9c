#!/usr/bin/env bash
# The README's compare examples, run exactly as written after their
# `runner run`, at the shipped settings, in a scratch folder and database:
# does each reach a verdict on this machine (issue 35)?
#
# The compare lines are read from README.md (every `runner compare
# experiment:NAME --by ...` line), so the script follows the README. For each
# NAME it runs `runner run experiments/NAME.toml` (loader_workers first makes
# its images with the README's `python scripts/make_datasets.py data`, the
# venv's python), then the compare line, and prints the compare output, the
# wall time of the run and the load average before and after. The CPU is
# printed first: what a verdict says depends on it (docs/method.md, "The
# shipped experiments' verdicts", has one run's output).
#
# Slow: amp, data_parallel and loader_workers at 5 repetitions; 41 minutes
# on this project's Intel Xeon (2 vCPUs) at load average 5-8.
#
# usage: bench/verdicts.sh [--runner PATH] [--python PATH] [--only NAME] [--keep DIR]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/.." && pwd)"
runner="${root}/build/bin/runner"
python="${HOME}/.cache/runner/venv-torch-2.14.1/bin/python"
only=""
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runner) runner="$(realpath "$2")"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "verdicts.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "${runner}" ]] || { echo "verdicts.sh: no runner at ${runner}; build it first" >&2; exit 2; }

if [[ -n "${keep}" ]]; then
  work="${keep}"
  mkdir -p "${work}"
else
  work="$(mktemp -d /tmp/runner-verdicts.XXXXXX)"
  trap 'rm -rf "${work}"' EXIT
fi
# The commands are written to run from the source tree's root: experiments/
# (whose files name ../data), scripts/.
rm -rf "${work}/experiments"
cp -r "${root}/experiments" "${work}/experiments"
ln -sfn "${root}/scripts" "${work}/scripts"
cd "${work}"

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) vCPUs," \
     "bf16 instructions: $(grep -o -w 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//' || true)"
[[ -z "$(grep -o -w 'avx512_bf16\|amx_bf16' /proc/cpuinfo | head -1)" ]] && echo "     (none: bf16 is emulated)"
echo "runner: $("${runner}" --version), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo

# The README's compare lines with --by, remarks removed.
mapfile -t compares < <(grep -E '^runner compare experiment:[a-z_0-9]+ .*--by ' "${root}/README.md" |
                        sed -E 's/[[:space:]]+#.*$//')
[[ ${#compares[@]} -gt 0 ]] || { echo "verdicts.sh: README.md has no compare --by line" >&2; exit 1; }

for line in "${compares[@]}"; do
  name="$(sed -E 's/^runner compare experiment:([a-z_0-9]+) .*/\1/' <<<"${line}")"
  [[ -n "${only}" && "${name}" != "${only}" ]] && continue
  echo "== ${name}"
  if [[ "${name}" == loader_workers && ! -d data/images ]]; then
    echo "\$ python scripts/make_datasets.py data"
    "${python}" scripts/make_datasets.py data > /dev/null
  fi
  before="$(load)"
  start=$(date +%s)
  echo "\$ runner run experiments/${name}.toml"
  if ! "${runner}" run "experiments/${name}.toml" > "run-${name}.log" 2>&1; then
    echo "run failed (exit $?); its log: ${work}/run-${name}.log"
    tail -5 "run-${name}.log"
    continue
  fi
  echo "ran in $(( $(date +%s) - start )) s, load average ${before} before, $(load) after"
  echo "\$ ${line}"
  # Exactly as written: `runner` is the built binary, the database ./runner.db.
  eval "\"${runner}\" ${line#runner }" || echo "(compare exited $?)"
  echo
done
