#!/usr/bin/env bash
# One CI job of the performance history (examples/ci/README.md): run the
# experiments at this commit, write the report, and fail when this commit
# slowed a configuration down. The store (runner.db) is restored before and
# saved after by the CI service (github-actions.yml, gitlab-ci.yml), or by
# tests/ci/play_ci.sh, which plays this job over a scratch repository.
#
#   examples/ci/job.sh COMMIT SELECTOR FILE...
#
#   COMMIT    the commit under test, recorded as the label commit=COMMIT
#   SELECTOR  what the history and the report read: experiment:NAME, or
#             several selectors in one argument ("experiment:a experiment:b")
#   FILE...   the experiment files to run
#
# Settings (environment): RUNNER (default: runner), RUNNER_DB (default:
# runner.db), GATE (default: regression; regression:5 ignores slowdowns
# whose interval reaches below 5 %), REPORT (default: report.html),
# BRANCH (recorded as the label branch when set), RUN_ARGS (more options
# for runner run, e.g. "--set experiment.repeats=5").
#
# Exit status: 0 when this commit is no slowdown, 1 when the history's last
# change point is a slowdown that starts at this commit, 2 or more when a
# step failed (bad input, a failed run).
set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 COMMIT SELECTOR FILE..." >&2
  exit 2
fi
commit=$1
read -r -a selectors <<< "$2"
shift 2
runner=${RUNNER:-runner}
export RUNNER_DB=${RUNNER_DB:-runner.db}
gate=${GATE:-regression}
report=${REPORT:-report.html}
read -r -a run_args <<< "${RUN_ARGS:-}"
labels=(--label "commit=$commit")
if [ -n "${BRANCH:-}" ]; then labels+=(--label "branch=$BRANCH"); fi

# 1. This commit's runs, added to the history the store already holds. The
#    label is the commit: the same configuration at every commit is one
#    series, and a rerun of this job resumes this commit's runs only.
"$runner" run "$@" "${labels[@]}" "${run_args[@]}"
status=$?
if [ "$status" -ne 0 ]; then
  echo "job: runner run exited $status" >&2
  exit $((status == 1 ? 3 : status))
fi

# 2. The report, written before the gate so that a failing job publishes it too.
if ! "$runner" report "${selectors[@]}" --out "$report"; then
  echo "job: runner report failed" >&2
  exit 3
fi

# 3. The gate: each configuration's runs along the commits, and where they
#    changed level. --fail-on exits 1 while the last change point is a
#    slowdown; this job fails only when that slowdown starts at this commit,
#    so the commit that caused it fails, and the ones after it (not their
#    doing) pass with a notice until the series changes again.
gate_log=$(mktemp)
trap 'rm -f "$gate_log"' EXIT
"$runner" history "${selectors[@]}" --along label:commit --fail-on "$gate" 2> "$gate_log"
status=$?
cat "$gate_log" >&2
case $status in
  0) exit 0 ;;
  1)
    if grep -q -F "label:commit=$commit on:" "$gate_log"; then
      echo "job: commit $commit slowed a configuration down (above)" >&2
      exit 1
    fi
    echo "job: notice: the slowdown above started at an earlier commit, not at $commit" >&2
    exit 0
    ;;
  *)
    echo "job: runner history exited $status" >&2
    exit "$status"
    ;;
esac
