#!/bin/sh
# Simulator speed: one 64-worker ATP job on the ns-3 backend and on the in-process network; link
# packets per second of wall-clock and of CPU time.
# Usage: experiments/ns3/speed/run.sh [--smoke] [OUT_DIR]
#   full (about 1 minute): JSON to experiments/ns3/speed/results/, PNG to docs/img/ns3-speed.png
#   --smoke (a few seconds): a tiny tensor; JSON and PNG only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNG go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup speed "$@"

variants $SMOKE "$GEN"
# One run per backend, one after the other (never side by side: they would share the cores).
for backend in ns3 inproc; do
  rc=0
  /usr/bin/python3 $HERE/timed.py "$RESULTS/$backend.json" "$RESULTS/$backend-time.json" \
    "$ATP" run --backend "$backend" --json "$GEN/speed.yaml" || rc=$?
  [ "$rc" -eq 0 ] || { echo "run.sh: $ATP run --backend $backend failed (exit $rc, see $RESULTS/$backend.json)" >&2; exit 1; }
done
plot_and_report
