#!/bin/sh
# Paper Fig. 13a on ns-3: three jobs on one switch, ATP's dynamic sharing vs SwitchML-style static
# shares (ATP with both hashed indices: hashed and hashed_slots), as the aggregator table shrinks
# from 100% to 33% of the peak throughput aggregators.
# Usage: experiments/ns3/fig13a/run.sh [--smoke] [OUT_DIR]
#   full (about 7 minutes): JSON to experiments/ns3/fig13a/results/, PNGs to docs/img/ns3-fig13a*.png
#   --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=--smoke; shift; fi
OUT=${1:-}
if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
fi
cd "$(dirname "$0")/../../.."
ATP=${ATP:-./build/atp}
HERE=experiments/ns3/fig13a
[ -x "$ATP" ] || { echo "run.sh: $ATP is not built; build the atp target (or set ATP=path/to/atp)" >&2; exit 2; }
/usr/bin/python3 -c "import matplotlib, yaml" 2>/dev/null ||
  { echo "run.sh: the plots need Debian's python3-matplotlib and python3-yaml (apt-get install python3-matplotlib python3-yaml)" >&2; exit 2; }
if [ -n "$OUT" ]; then
  RESULTS=$OUT IMAGES=$OUT
elif [ -n "$SMOKE" ]; then
  RESULTS=$(mktemp -d) IMAGES=$RESULTS
else
  RESULTS=$HERE/results IMAGES=docs/img
fi
mkdir -p "$RESULTS" "$IMAGES"
GEN=$(mktemp -d)
trap 'rm -rf "$GEN"' EXIT

# Runs one scenario on ns-3: its JSON next to the others. A job that fails (exit 1) is recorded,
# not fatal: its JSON says why. Anything else (a bad file, a crash) stops the experiment.
run_one() {
  rc=0
  "$ATP" run --backend ns3 --json "$1" >"$RESULTS/$(basename "$1" .yaml).json" || rc=$?
  case $rc in
    0) ;;
    1) echo "run.sh: $(basename "$1"): a job did not complete correctly (see its JSON)" >&2 ;;
    *) echo "run.sh: $ATP failed on $1 (exit $rc)" >&2; exit 1 ;;
  esac
}

# 1. How many aggregators one job needs: one job alone, and three jobs with static shares.
/usr/bin/python3 $HERE/variants.py sweep $SMOKE "$GEN/sweep"
for f in "$GEN"/sweep/*.yaml; do run_one "$f"; done
# 2. The PTA from the sweep, then every scheme at 100% .. 33% of it.
/usr/bin/python3 $HERE/variants.py compare $SMOKE "$RESULTS" "$GEN/compare"
for f in "$GEN"/compare/*.yaml; do run_one "$f"; done
/usr/bin/python3 $HERE/plot.py "$RESULTS" "$IMAGES"
echo "run.sh: results in $RESULTS, plots in $IMAGES"
