#!/bin/sh
# Rina's Fig. 12 (its §VI-D testbed) on the netns testbed: 8 workers in 2 racks of 4, the two ToRs
# linked to each other (the paper's "spine-leaf simple topology" of two Tofino ToRs), every link
# at RATE_MBPS; for each of the paper's five models, one allreduce of its gradient per iteration
# with PS (a shard on every worker, BytePS's N-to-N, as the paper's "co-located PS"), ring,
# hierarchical (H-AR), ATP (both ToRs aggregating; its PS on a ninth host under tor1, since ATP's
# in-network aggregation cannot put PS shards on workers' hosts) and Rina. Reported:
# allreduces per second (the communication half of the paper's training throughput; per-iteration
# compute is not modelled) and Rina's ratio to the ring and to H-AR. ALGORITHMS="..." runs others
# too (docs/plink.md runs it with plink and plink_fa).
# Usage: experiments/rina/fig12/run.sh [--smoke] [OUT_DIR]   (as root: network namespaces)
#   full: each model's gradient divided by SCALE (default 8 on a 2-core machine, where the full
#     sizes take an hour; SCALE=1 for the paper's), 1 warm-up and ITERS (2) timed iterations per
#     algorithm; JSON per run and table.txt to experiments/rina/fig12/results/ (or OUT_DIR)
#   --smoke (about a minute): gradients divided by 256, 1 timed iteration; into OUT_DIR (default: a
#     new temp dir)
# Parameters (torchvision's models; BERT-base uncased): ResNet50 25,557,032; VGG16 138,357,544;
# InceptionV3 27,161,264; ResNet101 44,549,160; BERT-base 109,482,240.
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=yes; shift; fi
OUT=${1:-}
if [ -n "$OUT" ]; then mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd); fi
cd "$(dirname "$0")/../../.."
ATP=${ATP:-./build/atp}
[ -x "$ATP" ] || { echo "run.sh: $ATP is not built; build the atp target (or set ATP=path/to/atp)" >&2; exit 2; }
if [ -z "$OUT" ]; then
  if [ -n "$SMOKE" ]; then OUT=$(mktemp -d); else OUT=experiments/rina/fig12/results; fi
fi
mkdir -p "$OUT"
if [ -n "$SMOKE" ]; then SCALE=${SCALE:-256}; ITERS=${ITERS:-1}; else SCALE=${SCALE:-8}; ITERS=${ITERS:-2}; fi
RATE_MBPS=${RATE_MBPS:-200}
GEN=$(mktemp -d)
trap 'rm -rf "$GEN"' EXIT

MODELS="resnet50:25557032 vgg16:138357544 inceptionv3:27161264 resnet101:44549160 bert-base:109482240"
ALGORITHMS=${ALGORITHMS:-"ps ring hierarchical atp rina"}  # PLink's end-to-end comparison adds plink plink_fa
WORKERS="w0, w1, w2, w3, w4, w5, w6, w7"

# scenario ALGORITHM ELEMENTS: the testbed and one job. ECN at 16 packets, as `atp bench`'s.
scenario() {
  case $1 in
    ps) ps=", ps: [$WORKERS]" ;;
    atp) ps=", ps: [ps]" ;;
    *) ps= ;;
  esac
  cat <<YAML
seed: 1
time_limit_s: 3600
link: {rate_mbps: $RATE_MBPS, ecn_threshold_packets: 16}
topology:
  switches: [{name: tor0, atp: true}, {name: tor1, atp: true}]
  hosts:
    - {name: w0, switch: tor0}
    - {name: w1, switch: tor0}
    - {name: w2, switch: tor0}
    - {name: w3, switch: tor0}
    - {name: w4, switch: tor1}
    - {name: w5, switch: tor1}
    - {name: w6, switch: tor1}
    - {name: w7, switch: tor1}
    - {name: ps, switch: tor1}
  links: [[tor0, tor1]]
jobs:
  - {name: fig12, algorithm: $1, workers: [$WORKERS]$ps, elements: $2, rounds: $((ITERS + 1)), warmup_rounds: 1}
YAML
}

: >"$OUT/times.txt"
for model in $MODELS; do
  name=${model%%:*}
  elements=$(( ${model#*:} / SCALE ))
  for algorithm in $ALGORITHMS; do
    scenario "$algorithm" "$elements" >"$GEN/run.yaml"
    start=$(date +%s)
    status=0
    "$ATP" run --backend netns --json "$GEN/run.yaml" >"$OUT/$name-$algorithm.json" || status=$?
    if [ "$status" -gt 1 ]; then
      echo "run.sh: atp run failed (exit $status) for $name, $algorithm" >&2
      cp "$GEN/run.yaml" "$OUT/$name-$algorithm.yaml"
      exit 1
    fi
    echo "$name $algorithm $(( $(date +%s) - start )) s" >>"$OUT/times.txt"
  done
done

# The table: allreduces per second (timed iterations / their seconds), Rina against the others.
/usr/bin/python3 - "$OUT" "$SCALE" "$RATE_MBPS" "$MODELS" "$ALGORITHMS" <<'PY' | tee "$OUT/table.txt"
import json, os, sys
out, scale, rate, models, algorithms = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
print(f"# netns, 8 workers in 2 racks, links {rate} Mbit/s; gradients / {scale}; allreduces per second "
      "(timed iterations / seconds); 'failed' where a run was not correct")
print("%-12s %10s" % ("model", "MB") + "".join("%13s" % a for a in algorithms) + "   rina/ring  rina/hier")
for m in models:
    name, params = m.split(":")
    rate_of = {}
    row = "%-12s %10.1f" % (name, int(params) // scale * 4 / 1e6)
    for a in algorithms:
        job = json.load(open(os.path.join(out, f"{name}-{a}.json")))["jobs"][0]
        timed = job["completed_rounds"] - job["warmup_rounds"]
        ok = job["correct"] and job["seconds"] > 0 and timed > 0
        rate_of[a] = timed / job["seconds"] if ok else None
        row += "%13s" % ("%.3f" % rate_of[a] if ok else "failed")
    ratio = lambda x, y: "%.2fx" % (rate_of[x] / rate_of[y]) if rate_of.get(x) and rate_of.get(y) else "-"
    print(row + "   %9s  %9s" % (ratio("rina", "ring"), ratio("rina", "hierarchical")))
PY
