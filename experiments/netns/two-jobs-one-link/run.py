#!/usr/bin/python3
"""Two ATP jobs on one bottleneck, every setting at its default (issue 19): jobs.yaml, run RUNS
times on the netns testbed. Each job's rate while both run is the tensor bytes of its rounds that
start from 0.5 s after job b starts and end by b's last round, over the time they took; the ratio
is a's over b's; a alone is a's median round before b starts. Every result is checked.
Usage: experiments/netns/two-jobs-one-link/run.py [--smoke] [--runs N] [OUT_DIR]   (root; --smoke: one run)
"""
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import experiment, finish, rate_mbps, rounds, run_netns  # noqa: E402

LINK_MBPS = 200
B_START_S = 1.0


def main():
    args = experiment.arguments(__doc__, HERE,
                                add=lambda p: p.add_argument("--runs", type=int, default=3, help="runs (default 3)"))
    runs = 1 if args.smoke else args.runs
    atp = experiment.atp_binary()
    lines = [f"# netns, two 3-worker ATP jobs whose rack-0 sums share one {LINK_MBPS} Mbit/s link, defaults; "
             "1 MiB allreduces; b from 1 s. Mbit/s while both run",
             f"{'run':<5}{'correct':>8}{'a alone':>9}{'a':>7}{'b':>7}{'a / b':>7}{'together':>9}{'marks':>7}{'drops':>7}"]
    failed = False
    for i in range(runs):
        d = run_netns(atp, os.path.join(HERE, "jobs.yaml"), os.path.join(args.out, f"run{i}.json"), f"run {i}")
        a, b = d["jobs"]
        b_end = max(b["round_end_seconds"])
        ra = rate_mbps(a, rounds(a, 0, B_START_S + 0.5, b_end))
        rb = rate_mbps(b, rounds(b, B_START_S, B_START_S + 0.5, b_end))
        alone = statistics.median([a["tensor_bytes"] * 8 / (y - x) / 1e6 for x, y in rounds(a, 0, 0, B_START_S)])
        link = next(l for l in d["links"] if l["from"] == "tor0" and l["to"] == "tor1")
        failed = failed or not d["correct"]
        lines.append(f"{i:<5}{str(d['correct']):>8}{alone:>9.0f}{ra:>7.0f}{rb:>7.0f}{ra / rb:>7.2f}"
                     f"{(ra + rb) / LINK_MBPS:>9.2f}{link['ecn_marked']:>7}{link['queue_drops']:>7}")
    finish(args.out, lines, failed)


if __name__ == "__main__":
    main()
