#!/usr/bin/python3
"""Rina's Fig. 5 (its §III-C), the bandwidth-occupation model's half: PS-based in-network
aggregation (ATP) as the switches of a k=4 fat-tree and of a dragonfly (a=4, g=9, h=2) are made
aggregating one at a time, in Rina's order (`atp bom --incremental`, include/atp/plan/bom.h).
One job on each: every host a worker but the last, which is the PS.

Usage: experiments/rina/fig5-bom/run.py [--smoke] [OUT_DIR]
  full and --smoke are the same (the model takes milliseconds); the text goes to
  experiments/rina/fig5-bom/results/, or to OUT_DIR (--smoke without one: a new temp dir).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402


def scenario(atp, *args):
    """The topology, then a job of every host but the last, whose host is the PS."""
    text, hosts = experiment.topology(atp, *args)
    return text + f"jobs:\n  - {{name: fig5, workers: [{', '.join(hosts[:-1])}], ps: [{hosts[-1]}], elements: 1000}}\n"


def main():
    args = experiment.arguments(__doc__, HERE)
    atp = experiment.atp_binary()
    with experiment.temp_dir() as gen:
        for name, topology in (("fat-tree", ["fat-tree", "--k", "4"]),
                               ("dragonfly", ["dragonfly", "--a", "4", "--g", "9", "--h", "2"])):
            path = os.path.join(gen, name + ".yaml")
            experiment.write_text(path, scenario(atp, *topology))
            bom = experiment.run([atp, "bom", path, "--incremental"], f"atp bom on {name}").stdout
            experiment.write_text(os.path.join(args.out, name + ".txt"), bom.replace(gen + "/", ""))
    print(f"{experiment.script_name()}: {args.out}/fat-tree.txt, {args.out}/dragonfly.txt")


if __name__ == "__main__":
    main()
