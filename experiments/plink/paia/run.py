#!/usr/bin/python3
"""PLink's §5.5: how well probes and their embedding order hosts as the topology does (PAIA), for
latency and bandwidth probes, raw and embedded with alpha 1 and 2 (`atp discover --json`).

Topologies (each seeded; every link 1 Gbit/s, 2 us, 64-packet buffers, ECN at 16 packets):
  hidden     a region of 2 datacenters x 4 clusters x 4 rows x 4 racks; 64 hosts on racks drawn at
             random (most racks get one, as the paper's 64 VMs on 61 racks); switches only where a
             host is below. Delays up the tree: rack-row 5 us, row-cluster 10, cluster-datacenter
             20, datacenter-region 250 (the paper's VMs: 2 datacenters, 7 clusters, 15 rows, 61 racks)
  one-dc     the same in one datacenter of 8 clusters (the paper's second case: a single
             datacenter, whose shorter range of latencies is harder to order)
  fat-tree   `atp topology fat-tree --k 4` (16 hosts), every link alike
  netns      (--backend netns; root) 2 clusters x 2 rows x 2 racks x 2 hosts at 100 Mbit/s, the
             same delays
Noise: background TCP flows between hosts drawn at random (8 on the 64-host ones, 2 on the others),
running while the probes run: the cross traffic of a cloud.

Reported: table.txt (per topology and seed: triplets, PAIA of latency and bandwidth probes, of the
latency embedding with alpha 1 and 2), a JSON per run.

Usage: experiments/plink/paia/run.py [--smoke] [--seeds N] [--netns] [OUT_DIR]
       (--smoke: the fat-tree and a 16-host hidden)
"""
import json
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402

DELAYS_US = {"row": 5, "cluster": 10, "dc": 20, "region": 250}  # of the link from a switch to its parent


def hierarchy(seed, datacenters, clusters, rows, racks, hosts, flows, rate="rate_gbps: 1"):
    """A scenario file: `hosts` hosts on racks drawn at random from the tree, `flows` background flows."""
    rng = random.Random(seed)
    every_rack = [(d, c, r, k) for d in range(datacenters) for c in range(clusters) for r in range(rows)
                  for k in range(racks)]
    placed = [rng.choice(every_rack) for _ in range(hosts)]
    switches, links, delays, host_lines, names = ["region"], [], [], [], []
    def add(name, parent, level):
        if name not in switches:
            switches.append(name)
            links.append(f"[{name}, {parent}]")
            delays.append(f"  - {{link: [{name}, {parent}], delay_us: {DELAYS_US[level]}}}")
    for i, (d, c, r, k) in enumerate(placed):
        dc, cl, row, rack = f"d{d}", f"d{d}c{c}", f"d{d}c{c}r{r}", f"d{d}c{c}r{r}k{k}"
        add(dc, "region", "region")
        add(cl, dc, "dc")
        add(row, cl, "cluster")
        add(rack, row, "row")
        names.append(f"h{i}")
        host_lines.append(f"    - {{name: h{i}, switch: {rack}}}")
    background = [f"  - {{from: {a}, to: {b}}}" for a, b in (rng.sample(names, 2) for _ in range(flows))]
    return (f"seed: {seed}\nlink: {{{rate}, buffer_packets: 64, ecn_threshold_packets: 16}}\n"
            f"topology:\n  switches: [{', '.join('{name: ' + s + '}' for s in switches)}]\n  hosts:\n"
            + "\n".join(host_lines) + f"\n  links: [{', '.join(links)}]\n"
            + "faults:\n" + "\n".join(delays) + "\n" + "background:\n" + "\n".join(background) + "\n")


def fat_tree(atp, seed, flows):
    topology = experiment.run([atp, "topology", "fat-tree", "--k", "4"], "atp topology fat-tree")
    names = [line.split("name: ")[1].split(",")[0] for line in topology.stdout.splitlines() if "switch: " in line]
    rng = random.Random(seed)
    background = [f"  - {{from: {a}, to: {b}}}" for a, b in (rng.sample(names, 2) for _ in range(flows))]
    return (f"seed: {seed}\nlink: {{rate_gbps: 1, buffer_packets: 64, ecn_threshold_packets: 16}}\n"
            + "".join(line + "\n" for line in topology.stdout.splitlines() if not line.startswith("#"))
            + "background:\n" + "\n".join(background) + "\n")


def main():
    def flags(parser):
        parser.add_argument("--seeds", type=int, default=3)
        parser.add_argument("--netns", action="store_true", help="also the 16-host netns topology (root)")

    args = experiment.arguments(__doc__, HERE, add=flags)
    atp = experiment.atp_binary()
    runs = []  # (label, backend, seed, scenario)
    seeds = range(1, 2 if args.smoke else args.seeds + 1)
    for seed in seeds:
        if args.smoke:
            runs.append(("hidden-16", "ns3", seed, hierarchy(seed, 2, 2, 2, 2, 16, 2)))
        else:
            runs.append(("hidden", "ns3", seed, hierarchy(seed, 2, 4, 4, 4, 64, 8)))
            runs.append(("one-dc", "ns3", seed, hierarchy(seed, 1, 8, 4, 4, 64, 8)))
        runs.append(("fat-tree", "ns3", seed, fat_tree(atp, seed, 2)))
        if args.netns:
            runs.append(("netns", "netns", seed, hierarchy(seed, 1, 2, 2, 2, 16, 2, "rate_mbps: 100")))
    lines = []
    with tempfile.TemporaryDirectory() as gen:
        for label, backend, seed, text in runs:
            path = os.path.join(gen, f"{label}-{seed}.yaml")
            with open(path, "w") as f:
                f.write(text)
            run = experiment.run([atp, "discover", "--backend", backend, "--json", "--transfer-bytes", "65536", path],
                                 f"atp discover on {label} (seed {seed})")
            with open(os.path.join(args.out, f"{label}-{seed}.json"), "w") as f:
                f.write(run.stdout)
            with open(os.path.join(args.out, f"{label}-{seed}.yaml"), "w") as f:
                f.write(text)
            p = json.loads(run.stdout)["paia"]
            line = (f"{label:<10}{backend:>7}{seed:>6}{p['latency']['triplets']:>10}"
                    + "".join(f"{100 * p[k]['score']:>10.1f}"
                              for k in ("latency", "bandwidth", "embedded_alpha1", "embedded_alpha2")))
            print(line, flush=True)
            lines.append(line)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write("# PAIA (%) of the probes, raw and embedded (atp discover --json, 64 KiB transfers)\n")
        f.write(f"{'topology':<10}{'backend':>7}{'seed':>6}{'triplets':>10}{'latency':>10}{'bandwidth':>10}"
                f"{'alpha 1':>10}{'alpha 2':>10}\n")
        f.write("".join(line + "\n" for line in lines))
    print(open(os.path.join(args.out, "table.txt")).read(), end="")


if __name__ == "__main__":
    main()
