#!/bin/sh
# Paper Fig. 16 on ns-3: an ATP job and a TCP flow share the link to one worker at 100 Gbit/s,
# ATP's congestion control on and off, and on with higher ECN thresholds; goodput over time.
# Usage: experiments/ns3/fig16/run.sh [--smoke] [OUT_DIR]
#   full (about 2.5 minutes): JSON to experiments/ns3/fig16/results/, PNGs to docs/img/ns3-fig16*.png
#   --smoke (a few seconds): a 3 ms run; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig16 "$@"
# Goodput samples every SERIES ms (job: --series; the TCP flow uses the same interval).
SERIES=0.5
[ -n "$SMOKE" ] && SERIES=0.1
# A job that does not finish within the time limit (exit 1: ATP starved by the flow) is recorded,
# not fatal: its JSON has the series.
INCOMPLETE="the job did not complete within the time limit (see its JSON)"

variants $SMOKE "$GEN"
for f in "$GEN"/*.yaml; do run_one "$f" --series "$SERIES"; done
plot_and_report
