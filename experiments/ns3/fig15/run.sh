#!/bin/sh
# Paper Fig. 15 on ns-3: one 8-worker job with half the aggregators it needs (an incast of
# unaggregated packets on the PS's link), ATP's congestion control on vs off, over time (--series).
# Usage: experiments/ns3/fig15/run.sh [--smoke] [OUT_DIR]
#   full (about 1 minute): JSON to experiments/ns3/fig15/results/, PNGs to docs/img/ns3-fig15*.png
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
HERE=experiments/ns3/fig15
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

# Runs one scenario on ns-3 (further arguments go to atp run): its JSON next to the others. A job
# that fails (exit 1) is recorded, not fatal: its JSON says why. Anything else (a bad file, a
# crash) stops the experiment.
run_one() {
  rc=0
  scenario=$1
  shift
  "$ATP" run --backend ns3 --json "$@" "$scenario" >"$RESULTS/$(basename "$scenario" .yaml).json" || rc=$?
  case $rc in
    0) ;;
    1) echo "run.sh: $(basename "$scenario"): a job did not complete correctly (see its JSON)" >&2 ;;
    *) echo "run.sh: $ATP failed on $scenario (exit $rc)" >&2; exit 1 ;;
  esac
}

# 1. How many aggregators the job needs for its peak (CC on).
/usr/bin/python3 $HERE/variants.py sweep $SMOKE "$GEN/sweep"
for f in "$GEN"/sweep/*.yaml; do run_one "$f"; done
# 2. Half of that, CC on and off, with a time series every 50 us (smoke: 10 us).
/usr/bin/python3 $HERE/variants.py runs $SMOKE "$RESULTS" "$GEN/runs"
SERIES_MS=0.05
if [ -n "$SMOKE" ]; then SERIES_MS=0.01; fi
for f in "$GEN"/runs/*.yaml; do run_one "$f" --series "$SERIES_MS"; done
/usr/bin/python3 $HERE/plot.py "$RESULTS" "$IMAGES"
echo "run.sh: results in $RESULTS, plots in $IMAGES"
