#!/bin/sh
# Paper Fig. 10 on ns-3: loss from 0.001% to 1% on one worker's link, throughput normalised to no
# loss, ATP's loss recovery vs recovery by a 1 ms timeout alone (SwitchML's); congestion control off.
# Usage: experiments/ns3/fig10/run.sh [--smoke] [OUT_DIR]
#   full (about 3 minutes): JSON to experiments/ns3/fig10/results/, PNGs to docs/img/ns3-fig10*.png
#   --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig10 "$@"

variants $SMOKE "$GEN"
for f in "$GEN"/*.yaml; do run_one "$f"; done
plot_and_report
