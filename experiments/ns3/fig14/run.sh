#!/bin/sh
# Paper Fig. 14 on ns-3: 1 to 8 jobs on one switch with 100% of their peak throughput aggregators:
# ATP's defaults (the switch allocates) and hashed indices (HASH(job, seq), the authors'
# hashed_slots) vs linear indices over the shared table vs SwitchML-style static shares.
# Usage: experiments/ns3/fig14/run.sh [--smoke] [OUT_DIR]
#   full (about 3 minutes): JSON to experiments/ns3/fig14/results/, PNGs to docs/img/ns3-fig14*.png
#   --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig14 "$@"

# Per-job goodput every 50 us (smoke: 10 us): the plot averages it while all n jobs run.
SERIES_MS=0.05
if [ -n "$SMOKE" ]; then SERIES_MS=0.01; fi
variants $SMOKE "$GEN"
for f in "$GEN"/*.yaml; do run_one "$f" --series "$SERIES_MS"; done
plot_and_report
