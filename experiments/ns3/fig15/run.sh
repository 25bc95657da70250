#!/bin/sh
# Paper Fig. 15 on ns-3: one 8-worker job with half the aggregators it needs (an incast of
# unaggregated packets on the PS's link), ATP's congestion control on vs off, over time (--series).
# Usage: experiments/ns3/fig15/run.sh [--smoke] [OUT_DIR]
#   full (about 1 minute): JSON to experiments/ns3/fig15/results/, PNGs to docs/img/ns3-fig15*.png
#   --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig15 "$@"

# 1. How many aggregators the job needs for its peak (CC on).
variants sweep $SMOKE "$GEN/sweep"
for f in "$GEN"/sweep/*.yaml; do run_one "$f"; done
# 2. Half of that, CC on and off, with a time series every 50 us (smoke: 10 us).
variants runs $SMOKE "$RESULTS" "$GEN/runs"
SERIES_MS=0.05
if [ -n "$SMOKE" ]; then SERIES_MS=0.01; fi
for f in "$GEN"/runs/*.yaml; do run_one "$f" --series "$SERIES_MS"; done
plot_and_report
