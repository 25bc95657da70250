#!/usr/bin/python3
"""PLink's Figs. 8-9 (its §5.4): two-level hierarchical aggregation (2LHA) with its groups from the
probes (`grouping: probe`: the job's workers probed first on the same backend, as `atp discover`
does), from the topology (the paper's "ground truth") and from Balanced Random, against flat
aggregation (FA), the ring, hierarchical allreduce (H-AR) and, on netns, Gloo's ring, over many
random placements: each placement takes WORKERS hosts at random from RACKS racks of HOSTS_PER_RACK
under one core switch and gives them ranks in random order, as a cloud's scheduler would. Every
link is RATE_MBPS, so a rack's uplink is HOSTS_PER_RACK:1 oversubscribed.

Reported: each run's algbw (Gbit/s, one untimed round first), a JSON per run, results.tsv (one line
per placement and algorithm) and table.txt (per algorithm over the placements: median, min, max, and
the median of probe-guided 2LHA's ratio to it in the same placement).

Usage: experiments/plink/placements/run.py [--smoke] [--placements N] [--backend ns3|netns] [OUT_DIR]
       (--smoke: 2 placements of 64 KiB; netns needs root; OUT_DIR by default results/, netns: results-netns/)
"""
import json
import os
import random
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402

RACKS, HOSTS_PER_RACK, WORKERS, RATE_MBPS = 4, 4, 9, 200
ALGORITHMS = [("plink-probe", "plink", "probe"), ("plink-topology", "plink", "topology"),
              ("plink-random", "plink", "random"), ("plink_fa", "plink_fa", None), ("ring", "ring", None),
              ("hierarchical", "hierarchical", None)]
GLOO = ("gloo", "gloo", None)  # real sockets only: netns


def scenario(seed, workers, algorithm, grouping, elements):
    hosts = "\n".join(f"    - {{name: h{r}_{i}, switch: tor{r}}}" for r in range(RACKS) for i in range(HOSTS_PER_RACK))
    switches = ", ".join([f"{{name: tor{r}}}" for r in range(RACKS)] + ["{name: core}"])
    links = ", ".join(f"[tor{r}, core]" for r in range(RACKS))
    group = f", grouping: {grouping}" if grouping else ""
    return (f"seed: {seed}\ntime_limit_s: 3600\nlink: {{rate_mbps: {RATE_MBPS}, ecn_threshold_packets: 16}}\n"
            f"topology:\n  switches: [{switches}]\n  hosts:\n{hosts}\n  links: [{links}]\n"
            f"jobs:\n  - {{name: placement, algorithm: {algorithm}{group}, workers: [{', '.join(workers)}], "
            f"elements: {elements}, rounds: 2, warmup_rounds: 1}}\n")


def main():
    def flags(parser):
        parser.add_argument("--placements", type=int, default=20)
        parser.add_argument("--backend", choices=["ns3", "netns"], default="ns3")

    args = experiment.arguments(__doc__, HERE, add=flags)
    if args.backend == "netns" and not (args.out_given or args.smoke):
        args.out = os.path.join(HERE, "results-netns")  # the committed netns runs
        os.makedirs(args.out, exist_ok=True)
    atp = experiment.atp_binary()
    placements, elements = (2, 16384) if args.smoke else (args.placements, 262144)  # 64 KiB or 1 MiB
    rng = random.Random(1)
    every = [f"h{r}_{i}" for r in range(RACKS) for i in range(HOSTS_PER_RACK)]
    algorithms = ALGORITHMS + ([GLOO] if args.backend == "netns" else [])
    rows = []
    with tempfile.TemporaryDirectory() as gen:
        for p in range(placements):
            workers = rng.sample(every, WORKERS)  # which hosts, and in which rank order
            for label, algorithm, grouping in algorithms:
                path = os.path.join(gen, "run.yaml")
                with open(path, "w") as f:
                    f.write(scenario(p + 1, workers, algorithm, grouping, elements))
                run = experiment.run([atp, "run", "--backend", args.backend, "--json", path],
                                     f"atp run (placement {p}, {label})", ok=(0, 1))
                if not run.stdout:  # the probes before the run failed: no result
                    rows.append((p, label, " ".join(workers), False, 0.0))
                    print(f"placement {p} {label}: FAILED: {run.stderr.strip()}", flush=True)
                    continue
                result = json.loads(run.stdout)
                with open(os.path.join(args.out, f"p{p}-{label}.json"), "w") as f:
                    f.write(run.stdout)
                job = result["jobs"][0]
                rows.append((p, label, " ".join(workers), job["correct"], job["algbw_gbps"]))
                print(f"placement {p} {label}: {job['algbw_gbps']:.4f} Gbit/s{'' if job['correct'] else ' FAILED'}",
                      flush=True)
    with open(os.path.join(args.out, "results.tsv"), "w") as f:
        f.write("placement\talgorithm\tworkers\tcorrect\talgbw_gbps\n")
        for row in rows:
            f.write("\t".join(map(str, row)) + "\n")
    algbw = {(p, label): a for p, label, _, ok, a in rows if ok}
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(f"# {args.backend}, {RACKS} racks of {HOSTS_PER_RACK} hosts, every link {RATE_MBPS} Mbit/s; "
                f"{WORKERS} workers placed at random, {placements} placements of {elements * 4} B per worker; algbw "
                f"in Gbit/s; probe/it: the median of probe-guided 2LHA's algbw over the algorithm's\n")
        f.write(f"{'algorithm':<16}{'median':>10}{'min':>10}{'max':>10}{'probe/it':>10}{'failed':>8}\n")
        for label, _, _ in algorithms:
            values = [algbw[(p, label)] for p in range(placements) if (p, label) in algbw]
            ratios = [algbw[(p, "plink-probe")] / algbw[(p, label)] for p in range(placements)
                      if (p, label) in algbw and (p, "plink-probe") in algbw and algbw[(p, label)] > 0]
            failed = placements - len(values)
            if values:
                f.write(f"{label:<16}{statistics.median(values):>10.4f}{min(values):>10.4f}{max(values):>10.4f}"
                        f"{statistics.median(ratios):>9.2f}x{failed:>8}\n")
            else:
                f.write(f"{label:<16}{'-':>10}{'-':>10}{'-':>10}{'-':>10}{failed:>8}\n")
    print(open(os.path.join(args.out, "table.txt")).read(), end="")


if __name__ == "__main__":
    main()
