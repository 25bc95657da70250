#!/bin/sh
# Paper Fig. 13b and 13c on ns-3: Fig. 13a's three jobs at the PTA, each job's in-switch share
# over time (--series), with defaults; 13c with job1 idle after 3 rounds (run.py has the details).
# Usage: experiments/ns3/fig13bc/run.sh [--smoke] [OUT_DIR]
#   full (15 s): JSON and table.txt to experiments/ns3/fig13bc/results/, PNGs to docs/img/
#   --smoke (2 s): a tenth of the tensor; everything into OUT_DIR (default: a new temp dir)
set -eu
. "$(dirname "$0")/../lib.sh"
setup fig13bc "$@"
# shellcheck disable=SC2086
ATP="$ATP" /usr/bin/python3 "$HERE/run.py" $SMOKE --images "$IMAGES" "$RESULTS"
echo "run.sh: JSON and table.txt in $RESULTS, PNGs in $IMAGES"
