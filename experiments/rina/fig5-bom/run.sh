#!/bin/sh
# Rina's Fig. 5 (its §III-C), the bandwidth-occupation model's half: PS-based in-network
# aggregation (ATP) as the switches of a k=4 fat-tree and of a dragonfly (a=4, g=9, h=2) are made
# aggregating one at a time, in Rina's order (`atp bom --incremental`, include/atp/plan/bom.h).
# One job on each: every host a worker but the last, which is the PS.
# Usage: experiments/rina/fig5-bom/run.sh [--smoke] [OUT_DIR]
#   full and --smoke are the same (the model takes milliseconds); the text goes to
#   experiments/rina/fig5-bom/results/, or to OUT_DIR (--smoke without one: a new temp dir).
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=yes; shift; fi
OUT=${1:-}
if [ -n "$OUT" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/../../.."
ATP=${ATP:-./build/atp}
[ -x "$ATP" ] || { echo "run.sh: $ATP is not built; build the atp target (or set ATP=path/to/atp)" >&2; exit 2; }
if [ -z "$OUT" ]; then
  if [ -n "$SMOKE" ]; then OUT=$(mktemp -d); else OUT=experiments/rina/fig5-bom/results; fi
fi
mkdir -p "$OUT"
GEN=$(mktemp -d)
trap 'rm -rf "$GEN"' EXIT

# The topology, then a job of every host but the last, whose host is the PS.
scenario() {
  "$ATP" topology "$@" >"$GEN/topology.yaml"
  hosts=$(sed -n 's/^    - {name: \([^,]*\), switch: .*/\1/p' "$GEN/topology.yaml")
  ps=$(echo "$hosts" | tail -1)
  workers=$(echo "$hosts" | sed '$d' | paste -sd, - | sed 's/,/, /g')
  cat "$GEN/topology.yaml"
  printf 'jobs:\n  - {name: fig5, workers: [%s], ps: [%s], elements: 1000}\n' "$workers" "$ps"
}

scenario fat-tree --k 4 >"$GEN/fat-tree.yaml"
"$ATP" bom "$GEN/fat-tree.yaml" --incremental | sed "s|$GEN/||" >"$OUT/fat-tree.txt"
scenario dragonfly --a 4 --g 9 --h 2 >"$GEN/dragonfly.yaml"
"$ATP" bom "$GEN/dragonfly.yaml" --incremental | sed "s|$GEN/||" >"$OUT/dragonfly.txt"
echo "run.sh: $OUT/fat-tree.txt, $OUT/dragonfly.txt"
