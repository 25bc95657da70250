#!/bin/sh
# Rina's §III-A: the ScatterReduce of a ring with a barrier after every step, whose time grows with
# the ring's length and the workers' jitter (the paper's Equation 1), for a plain ring of N workers
# and for Rina's ring of N/4 racks (ToRs that aggregate), by Monte Carlo beside the closed form.
# The paper has only the model here (no measurement); so does this.
# Usage: experiments/rina/sec3a/run.sh [--smoke] [OUT_DIR]
#   full (10 seconds): N = 8..256, four jitters, 400 trials each; results.tsv and sec3a.png (a text
#     table where matplotlib is missing) to experiments/rina/sec3a/results/
#   --smoke (2 seconds): N = 8..32, two jitters, 50 trials; into OUT_DIR (default: a new temp dir)
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=--smoke; shift; fi
OUT=${1:-}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "$OUT" ]; then
  if [ -n "$SMOKE" ]; then OUT=$(mktemp -d); else OUT=$HERE/results; fi
fi
mkdir -p "$OUT"
/usr/bin/python3 "$HERE/model.py" $SMOKE "$OUT/results.tsv"
/usr/bin/python3 "$HERE/plot.py" "$OUT/results.tsv" "$OUT/sec3a.png"
echo "run.sh: $OUT/results.tsv"
