#!/bin/sh
# Paper Fig. 13a on ns-3: three jobs on one switch, ATP's dynamic sharing (its defaults: the switch
# allocates; and the hashed and hashed_slots indices) vs SwitchML-style static shares, as the
# aggregator table shrinks from 100% to 33% of the peak throughput aggregators; and the defaults vs
# static shares where jobs compute longer than they communicate.
# Usage: experiments/ns3/fig13a/run.sh [--smoke] [OUT_DIR]
#   full (about 12 minutes): JSON to experiments/ns3/fig13a/results/, PNGs to docs/img/ns3-fig13a*.png
#   --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig13a "$@"

# 1. How many aggregators one job needs: one job alone, and three jobs with static shares.
variants sweep $SMOKE "$GEN/sweep"
for f in "$GEN"/sweep/*.yaml; do run_one "$f"; done
# 2. The PTA from the sweep, then every scheme at 100% .. 33% of it.
variants compare $SMOKE "$RESULTS" "$GEN/compare"
for f in "$GEN"/compare/*.yaml; do run_one "$f"; done
plot_and_report
