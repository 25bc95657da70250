#!/bin/sh
# Rina's Fig. 11 (its §VI-C) on ns-3: the switches of a k=4 fat-tree made aggregating one at a
# time in Rina's order (`atp bom --incremental`, its §IV-D), an ATP job and a Rina job measured
# packet by packet after each replacement, beside the bandwidth-occupation model's prediction.
# Usage: experiments/rina/fig11/run.sh [--smoke] [OUT_DIR]
#   full (16 minutes on 2 cores, 8 of them the ring's): ResNet50's gradient (25557032 float32
#     values, 97.5 MiB) per worker, one scenario run per step and algorithm; JSON, bom.txt,
#     table.txt, times.txt and fig11.png (or a text chart where matplotlib is missing) to
#     experiments/rina/fig11/results/
#   --smoke (10 seconds): the same steps with 500000 values; into OUT_DIR (default: a new temp
#     dir). OUT_DIR without --smoke: the full run's files go there instead. ELEMENTS=N sets
#     the float32 values per worker instead.
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=yes; shift; fi
OUT=${1:-}
if [ -n "$OUT" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/../../.."
ATP=${ATP:-./build/atp}
[ -x "$ATP" ] || { echo "run.sh: $ATP is not built; build the atp target (or set ATP=path/to/atp)" >&2; exit 2; }
if [ -z "$OUT" ]; then
  if [ -n "$SMOKE" ]; then OUT=$(mktemp -d); else OUT=experiments/rina/fig11/results; fi
fi
mkdir -p "$OUT"
GEN=$(mktemp -d)
trap 'rm -rf "$GEN"' EXIT

# ResNet50's 25,557,032 parameters: the paper's "98MB". Every link 100 Gbit/s (the paper's
# testbed ports; left unset, ns-3's links run at 10 Tbit/s and no link is a bottleneck), the
# scenario defaults otherwise (2 us; switch ports hold 1 MB and mark ECN from a depth sized for the rate).
if [ -n "$SMOKE" ]; then ELEMENTS=${ELEMENTS:-500000}; else ELEMENTS=${ELEMENTS:-25557032}; fi
RATE_GBPS=100

"$ATP" topology fat-tree --k 4 >"$GEN/topology.yaml"
hosts=$(sed -n 's/^    - {name: \([^,]*\), switch: .*/\1/p' "$GEN/topology.yaml")
ps=$(echo "$hosts" | tail -1)
workers=$(echo "$hosts" | sed '$d' | paste -sd, - | sed 's/,/, /g')

# scenario ALGORITHM [SWITCH...]: the fat-tree with these switches aggregating (atp: true) and one
# job of ALGORITHM on every host but the last (which is ATP's PS).
scenario() {
  algorithm=$1
  shift
  echo "link: {rate_gbps: $RATE_GBPS}"
  sed -n '/^topology:/,$p' "$GEN/topology.yaml" >"$GEN/ina.yaml"
  for switch in "$@"; do
    sed "s/^\(    - {name: $switch, atp: \)false}/\1true}/" "$GEN/ina.yaml" >"$GEN/ina.next"
    mv "$GEN/ina.next" "$GEN/ina.yaml"
  done
  [ "$(grep -c 'atp: true}' "$GEN/ina.yaml")" -eq $# ] ||
    { echo "run.sh: could not make $* aggregating in the fat-tree from $ATP topology" >&2; exit 1; }
  cat "$GEN/ina.yaml"
  if [ "$algorithm" = atp ]; then job_ps=", ps: [$ps]"; else job_ps=; fi
  printf 'jobs:\n  - {name: fig11, algorithm: %s, workers: [%s]%s, elements: %s}\n' \
    "$algorithm" "$workers" "$job_ps" "$ELEMENTS"
}

# run_one NAME SCENARIO: runs it on ns-3 into OUT/NAME.json, its wall time into OUT/times.txt. A
# job that fails (exit 1) is recorded, its scenario kept beside its JSON (OUT/NAME.yaml); anything
# else (a bad file, a crash) stops the experiment.
run_one() {
  name=$1
  scenario=$2
  start=$(date +%s)
  rc=0
  "$ATP" run --backend ns3 --json "$scenario" >"$OUT/$name.json" || rc=$?
  echo "$name $(($(date +%s) - start)) s" >>"$OUT/times.txt"
  case $rc in
    0) ;;
    1)
      cp "$scenario" "$OUT/$name.yaml"
      echo "run.sh: $name: a job did not complete correctly (see $OUT/$name.json, $OUT/$name.yaml)" >&2
      ;;
    *) echo "run.sh: $ATP failed on $scenario (exit $rc)" >&2; exit 1 ;;
  esac
}

# The model and the replacement order: the "+ SWITCH" rows of the incremental table.
scenario atp >"$GEN/fig11.yaml"
"$ATP" bom "$GEN/fig11.yaml" --incremental | sed "s|$GEN/||" >"$OUT/bom.txt"
order=$(sed -n 's/^+ \([^ ]*\) .*/\1/p' "$OUT/bom.txt")
[ -n "$order" ] || { echo "run.sh: no replacement order in $OUT/bom.txt" >&2; exit 1; }

rm -f "$OUT/times.txt" "$OUT"/atp-[0-9]*.* "$OUT"/rina-[0-9]*.* "$OUT"/ring.*
scenario ring >"$GEN/ring.yaml"
run_one ring "$GEN/ring.yaml"
step=0
ina=
while :; do
  tag=$(printf '%02d' "$step")
  for algorithm in atp rina; do
    # $ina is a list of switch names, split on purpose.
    # shellcheck disable=SC2086
    scenario "$algorithm" $ina >"$GEN/$algorithm-$tag.yaml"
    run_one "$algorithm-$tag" "$GEN/$algorithm-$tag.yaml"
  done
  next=$(echo "$order" | sed -n "$((step + 1))p")
  [ -n "$next" ] || break
  ina="$ina $next"
  step=$((step + 1))
done

/usr/bin/python3 experiments/rina/fig11/plot.py "$OUT" "$RATE_GBPS"
echo "run.sh: results in $OUT"
