#!/bin/sh
# Paper Fig. 9 on ns-3: traffic into the PS with ATP's two-level aggregation, with the paper's
# rack-scale solution (RSS) and with aggregation only at the workers' racks, at 100 Gbit/s.
# Usage: experiments/ns3/fig9/run.sh [--smoke] [OUT_DIR]
#   full (about 30 s): JSON to experiments/ns3/fig9/results/, PNG to docs/img/ns3-fig9.png
#   --smoke (a few seconds): tiny tensors; JSON and PNG only into OUT_DIR (default: a new temp dir)
#   OUT_DIR without --smoke: the full run's JSON and PNG go there instead.
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig9 "$@"

variants $SMOKE "$GEN"
for f in "$GEN"/*.yaml; do run_one "$f"; done
plot_and_report
