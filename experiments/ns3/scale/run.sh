#!/bin/sh
# Multi-rack allreduce on ns-3 at 100 Gbit/s: ATP vs a PS without in-network aggregation vs ring
# allreduce over TCP, 2 to 16 racks of 8 workers, and ATP with hashed indices on 3 table sizes.
# Usage: experiments/ns3/scale/run.sh [--smoke] [OUT_DIR]
#   full (about 4 minutes): JSON to experiments/ns3/scale/results/, PNGs to docs/img/ns3-scale*.png
#   --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup scale "$@"

variants $SMOKE "$GEN"
for f in "$GEN"/*.yaml; do run_one "$f"; done
plot_and_report
