#!/usr/bin/python3
"""Rina's Fig. 12 (its §VI-D testbed) on the netns testbed: 8 workers in 2 racks of 4, the two ToRs
linked to each other (the paper's "spine-leaf simple topology" of two Tofino ToRs), every link
at RATE_MBPS; for each of the paper's five models, one allreduce of its gradient per iteration
with PS (a shard on every worker, BytePS's N-to-N, as the paper's "co-located PS"), ring,
hierarchical (H-AR), ATP (both ToRs aggregating; its PS on a ninth host under tor1, since ATP's
in-network aggregation cannot put PS shards on workers' hosts) and Rina. Reported:
allreduces per second (the communication half of the paper's training throughput; per-iteration
compute is not modelled) and Rina's ratio to the ring and to H-AR. ALGORITHMS="..." runs others
too (docs/plink.md runs it with plink and plink_fa).

Usage: experiments/rina/fig12/run.py [--smoke] [OUT_DIR]   (as root: network namespaces)
  full: each model's gradient divided by SCALE (default 8 on a 2-core machine, where the full
    sizes take an hour; SCALE=1 for the paper's), 1 warm-up and ITERS (2) timed iterations per
    algorithm; JSON per run and table.txt to experiments/rina/fig12/results/ (or OUT_DIR)
  --smoke (about a minute): gradients divided by 256, 1 timed iteration; into OUT_DIR (default: a
    new temp dir)
  RATE_MBPS (200) sets every link's rate.
Models: experiment.MODELS (ResNet50, VGG16, InceptionV3, ResNet101, BERT-base).
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402

MODELS = experiment.MODELS
ALGORITHMS = "ps ring hierarchical atp rina"  # PLink's end-to-end comparison adds plink plink_fa
WORKERS = "w0, w1, w2, w3, w4, w5, w6, w7"


def scenario(algorithm, elements, rate_mbps, iters):
    """The testbed and one job. ECN at 16 packets, as `atp bench`'s."""
    ps = {"ps": f", ps: [{WORKERS}]", "atp": ", ps: [ps]"}.get(algorithm, "")
    hosts = "".join(f"    - {{name: w{i}, switch: tor{i // 4}}}\n" for i in range(8))
    return (f"seed: 1\ntime_limit_s: 3600\nlink: {{rate_mbps: {rate_mbps}, ecn_threshold_packets: 16}}\n"
            "topology:\n  switches: [{name: tor0, atp: true}, {name: tor1, atp: true}]\n  hosts:\n"
            f"{hosts}    - {{name: ps, switch: tor1}}\n  links: [[tor0, tor1]]\n"
            f"jobs:\n  - {{name: fig12, algorithm: {algorithm}, workers: [{WORKERS}]{ps}, elements: {elements}, "
            f"rounds: {iters + 1}, warmup_rounds: 1}}\n")


def table(out, scale, rate_mbps, algorithms):
    """Allreduces per second (timed iterations / their seconds), Rina against the others."""
    lines = [f"# netns, 8 workers in 2 racks, links {rate_mbps} Mbit/s; gradients / {scale}; allreduces per second "
             "(timed iterations / seconds); 'failed' where a run was not correct",
             "%-12s %10s" % ("model", "MB") + "".join("%13s" % a for a in algorithms) + "   rina/ring  rina/hier"]
    for name, params in MODELS:
        rate_of = {}
        row = "%-12s %10.1f" % (name, params // scale * 4 / 1e6)
        for a in algorithms:
            with open(os.path.join(out, f"{name}-{a}.json")) as f:
                job = json.load(f)["jobs"][0]
            timed = job["completed_rounds"] - job["warmup_rounds"]
            ok = job["correct"] and job["seconds"] > 0 and timed > 0
            rate_of[a] = timed / job["seconds"] if ok else None
            row += "%13s" % ("%.3f" % rate_of[a] if ok else "failed")

        def ratio(x, y):
            return "%.2fx" % (rate_of[x] / rate_of[y]) if rate_of.get(x) and rate_of.get(y) else "-"

        lines.append(row + "   %9s  %9s" % (ratio("rina", "ring"), ratio("rina", "hierarchical")))
    return lines


def main():
    args = experiment.arguments(__doc__, HERE)
    atp = experiment.atp_binary()
    out = args.out
    scale = int(os.environ.get("SCALE", 256 if args.smoke else 8))
    iters = int(os.environ.get("ITERS", 1 if args.smoke else 2))
    rate_mbps = os.environ.get("RATE_MBPS", "200")
    algorithms = os.environ.get("ALGORITHMS", ALGORITHMS).split()
    times = os.path.join(out, "times.txt")
    experiment.write_text(times, "")
    with experiment.temp_dir() as gen:
        path = os.path.join(gen, "run.yaml")
        for name, params in MODELS:
            for algorithm in algorithms:
                experiment.write_text(path, scenario(algorithm, params // scale, rate_mbps, iters))
                start = int(time.time())
                done = experiment.run([atp, "run", "--backend", "netns", "--json", path], "", ok=range(256),
                                      stdout=os.path.join(out, f"{name}-{algorithm}.json"))
                if done.returncode > 1:
                    with open(path) as src:
                        experiment.write_text(os.path.join(out, f"{name}-{algorithm}.yaml"), src.read())
                    experiment.fail(f"atp run failed (exit {done.returncode}) for {name}, {algorithm}")
                with open(times, "a") as f:
                    f.write(f"{name} {algorithm} {int(time.time()) - start} s\n")
    experiment.write_table(os.path.join(out, "table.txt"), table(out, scale, rate_mbps, algorithms))


if __name__ == "__main__":
    main()
