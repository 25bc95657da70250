#!/usr/bin/python3
"""PLink's Fig. 7 (its §5.3) on the netns testbed: flat aggregation (plink_fa, AggEngine with one
group) against the ring, Gloo's ring and halving-doubling, our halving-doubling and a BytePS-style
PS (a shard on every worker's host) on the same links: 8 workers under one switch, every link
RATE_MBPS (200), tensors of 256 KiB to 16 MiB per worker, 3 timed iterations each after 1 untimed
(atp bench allreduce, nccl-tests style: algbw and the first algorithm's ratio to each other).

Usage: experiments/plink/fig7/run.py [--smoke] [OUT_DIR]   (as root; --smoke: 64 KiB only)
  table.txt (atp bench's table, also printed) to experiments/plink/fig7/results/ or OUT_DIR
  (--smoke without one: a new temp dir). Fails if a result was wrong (atp bench's exit status).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402


def main():
    args = experiment.arguments(__doc__, HERE)
    atp = experiment.atp_binary()
    sizes = ["-b", "64K", "-e", "64K"] if args.smoke else ["-b", "256K", "-e", "16M", "-f", "4"]
    experiment.run_tee([atp, "bench", "allreduce", "--backend", "netns", "--workers", "8", "--racks", "1",
                        "--rate-mbps", os.environ.get("RATE_MBPS", "200"),
                        "--algorithms", "plink_fa,ring,gloo,gloo_hd,halving_doubling,ps_nn", *sizes,
                        "-n", "3", "-w", "1"],
                       "atp bench allreduce", os.path.join(args.out, "table.txt"))


if __name__ == "__main__":
    main()
