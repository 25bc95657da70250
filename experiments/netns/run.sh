#!/bin/sh
# Runs the multi-rack testbed experiments (issue 4) on the netns backend: the allreduce benchmark
# against the baselines, Fig. 9's traffic into the PS, two jobs on a small table, and an ATP job
# against a TCP flow with congestion control on and off. Writes JSON to experiments/netns/results/
# and plots to docs/img/. Needs root and a built ./build/atp (./run.sh test builds it).
# Usage: experiments/netns/run.sh [--quick]   (--quick: sizes up to 4 MiB, for a smoke run)
set -eu
cd "$(dirname "$0")/../.."
ATP=${ATP:-./build/atp}
# Checked first, so a missing piece is not found after twelve minutes of measurements.
[ -x "$ATP" ] || { echo "run.sh: $ATP is not built; run ./run.sh test (or set ATP=...)" >&2; exit 2; }
/usr/bin/python3 -c "import matplotlib" 2>/dev/null ||
  { echo "run.sh: the plots need Debian's python3-matplotlib (apt-get install python3-matplotlib)" >&2; exit 2; }
OUT=experiments/netns/results
mkdir -p "$OUT"
MAX=64M
[ "${1:-}" = "--quick" ] && MAX=4M

# One job, 8 workers in 2 racks, the PS under the core; every link 200 Mbit/s.
"$ATP" bench allreduce --backend netns --workers 8 --racks 2 --rate-mbps 200 --min-bytes 4K --max-bytes "$MAX" \
  --factor 4 --iters 5 --warmup 1 --algorithms atp,ring,gloo,ps,ps_nn \
  --json \
  >"$OUT/allreduce.json" ||
  # exit 1: a run failed (recorded in the JSON, with why); anything else stops the experiment.
  { rc=$?; [ "$rc" -eq 1 ] || exit "$rc"; echo "run.sh: a benchmark run failed (see allreduce.json)" >&2; }
for f in fig9 fig9-rack-only two-jobs-small-table tcp-competition tcp-competition-cc-off; do
  "$ATP" run --backend netns --json "experiments/netns/$f.yaml" >"$OUT/$f.json"
done
/usr/bin/python3 experiments/netns/plot.py "$OUT" docs/img
