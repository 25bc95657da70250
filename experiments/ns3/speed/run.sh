#!/bin/sh
# Simulator speed: one 64-worker ATP job on the ns-3 backend and on the in-process network; link
# packets per second of wall-clock and of CPU time.
# Usage: experiments/ns3/speed/run.sh [--smoke] [OUT_DIR]
#   full (about 1 minute): JSON to experiments/ns3/speed/results/, PNG to docs/img/ns3-speed.png
#   --smoke (a few seconds): a tiny tensor; JSON and PNG only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNG go there instead.
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
HERE=experiments/ns3/speed
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

/usr/bin/python3 $HERE/variants.py $SMOKE "$GEN"
# One run per backend, one after the other (never side by side: they would share the cores).
for backend in ns3 inproc; do
  rc=0
  /usr/bin/python3 $HERE/timed.py "$RESULTS/$backend.json" "$RESULTS/$backend-time.json" \
    "$ATP" run --backend "$backend" --json "$GEN/speed.yaml" || rc=$?
  [ "$rc" -eq 0 ] || { echo "run.sh: $ATP run --backend $backend failed (exit $rc, see $RESULTS/$backend.json)" >&2; exit 1; }
done
/usr/bin/python3 $HERE/plot.py "$RESULTS" "$IMAGES"
echo "run.sh: results in $RESULTS, plots in $IMAGES"
