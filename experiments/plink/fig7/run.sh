#!/bin/sh
# PLink's Fig. 7 (its §5.3) on the netns testbed: flat aggregation (plink_fa, AggEngine with one
# group) against the ring, Gloo's ring and halving-doubling, our halving-doubling and a BytePS-style
# PS (a shard on every worker's host) on the same links: 8 workers under one switch, every link
# RATE_MBPS (200), tensors of 256 KiB to 16 MiB per worker, 3 timed iterations each after 1 untimed
# (atp bench allreduce, nccl-tests style: algbw and the first algorithm's ratio to each other).
# Usage: experiments/plink/fig7/run.sh [--smoke] [OUT_DIR]   (as root; --smoke: 64 KiB only)
set -eu
SMOKE=
if [ "${1:-}" = "--smoke" ]; then SMOKE=yes; shift; fi
OUT=${1:-}
cd "$(dirname "$0")/../../.."
ATP=${ATP:-./build/atp}
[ -x "$ATP" ] || { echo "run.sh: $ATP is not built; build the atp target (or set ATP=path/to/atp)" >&2; exit 2; }
[ -n "$OUT" ] || OUT=experiments/plink/fig7/results
mkdir -p "$OUT"
if [ -n "$SMOKE" ]; then SIZES="-b 64K -e 64K"; else SIZES="-b 256K -e 16M -f 4"; fi
# shellcheck disable=SC2086
"$ATP" bench allreduce --backend netns --workers 8 --racks 1 --rate-mbps "${RATE_MBPS:-200}" \
  --algorithms plink_fa,ring,gloo,gloo_hd,halving_doubling,ps_nn $SIZES -n 3 -w 1 | tee "$OUT/table.txt"
