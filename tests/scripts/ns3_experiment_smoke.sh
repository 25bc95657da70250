#!/bin/sh
# Smoke run of one ns-3 reproduction (experiments/ns3/NAME/run.py --smoke): its scenarios run on
# a tiny scale, every job is correct, and its plot script writes PNGs.
# Usage: ns3_experiment_smoke.sh ATP_BINARY REPO_ROOT NAME
set -u
TEST_NAME="ns3 experiment $3"
. "$(dirname "$0")/../support/shell_test_lib.sh"
cd "$2" || exit 1
export ATP="$1"
if ! "experiments/ns3/$3/run.py" --smoke "$TMP/out" >"$TMP/log" 2>&1; then
  cat "$TMP/log" >&2
  fail "run.py --smoke exited with an error"
fi
ls "$TMP"/out/*.json >/dev/null 2>&1 || fail "no JSON results in the output folder"
ls "$TMP"/out/*.png >/dev/null 2>&1 || fail "no PNG plot in the output folder"
# Every scenario JSON that reports jobs must report them correct.
for f in "$TMP"/out/*.json; do
  [ -f "$f" ] || continue
  if grep -q '"correct": false' "$f"; then fail "$(basename "$f"): a job is not correct"; fi
done
finish
