#!/bin/sh
# Paper Fig. 14 on ns-3: 1 to 8 jobs on one switch with 100% of their peak throughput aggregators:
# ATP's hashed indices (HASH(job, seq) and the authors' hashed_slots) vs linear indices over the
# shared table vs SwitchML-style static shares.
# Usage: experiments/ns3/fig14/run.sh [--smoke] [OUT_DIR]
#   full (about 2 minutes): JSON to experiments/ns3/fig14/results/, PNGs to docs/img/ns3-fig14*.png
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
HERE=experiments/ns3/fig14
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

# Per-job goodput every 50 us (smoke: 10 us): the plot averages it while all n jobs run.
SERIES_MS=0.05
if [ -n "$SMOKE" ]; then SERIES_MS=0.01; fi
/usr/bin/python3 $HERE/variants.py $SMOKE "$GEN"
for f in "$GEN"/*.yaml; do run_one "$f" --series "$SERIES_MS"; done
/usr/bin/python3 $HERE/plot.py "$RESULTS" "$IMAGES"
echo "run.sh: results in $RESULTS, plots in $IMAGES"
