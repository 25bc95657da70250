#!/usr/bin/python3
"""Rina's Fig. 10 (its §VI-B) on ns-3: each of the paper's five models as one allreduce of its
gradient per iteration, on a k=4 fat-tree and a dragonfly (a=4, g=9, h=2), with PS, ring,
hierarchical (H-AR), and ATP and Rina at 50% and 100% of the switches replaced by aggregating
ones. 50% is the paper's count (fat-tree: 6 switches for ATP, 4 for Rina; dragonfly: 18 for
both), taken in `atp bom --incremental`'s order (Rina's §IV-D); 100% is every switch. One job on
every host but the last (the PS's, for PS and ATP), every link at RATE_GBPS (100: the paper's).

Reported: allreduces per second (the communication half of the paper's training throughput; the
models' per-iteration compute is not modelled) and algbw, a JSON per run, table.txt.

Usage: experiments/rina/fig10/run.py [--smoke] [--topologies fat-tree,dragonfly] [--scale N] [--only LABELS]
       [OUT_DIR]
  --scale N: each gradient divided by N (default 16 on a 2-core machine: the TCP baselines take
             most of the time, about 9 minutes per 100 MB on the fat-tree); --smoke: 4096, and
             ResNet50 and VGG16 only, on the fat-tree
  --only LABELS: run only these configurations (e.g. ps,atp-50%,atp-100%); the table takes the
             others from OUT_DIR's JSONs of an earlier run ("-" where there is none; one of
             another --scale is refused)
Models: experiment.MODELS (ResNet50, VGG16, InceptionV3, ResNet101, BERT-base).
"""
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402

MODELS = experiment.MODELS
TOPOLOGIES = {
    "fat-tree": (["fat-tree", "--k", "4"], {"atp": 6, "rina": 4}),
    "dragonfly": (["dragonfly", "--a", "4", "--g", "9", "--h", "2"], {"atp": 18, "rina": 18}),
}
RATE_GBPS = 100
SWITCH = re.compile(r"^    - \{name: ([^,]+), atp: (true|false)\}$")


def topology(atp, args):
    """The `atp topology` YAML (from its `topology:` line) and its hosts, in order."""
    text, hosts = experiment.topology(atp, *args)
    return text[text.index("topology:"):], hosts


def with_ina(text, switches):
    """The topology with exactly `switches` aggregating (None: every switch)."""
    lines = []
    for line in text.splitlines():
        m = SWITCH.match(line)
        if m:
            on = switches is None or m.group(1) in switches
            line = f"    - {{name: {m.group(1)}, atp: {'true' if on else 'false'}}}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def scenario(text, hosts, algorithm, elements, switches):
    workers = ", ".join(hosts[:-1])
    ps = f", ps: [{hosts[-1]}]" if algorithm in ("ps", "atp") else ""
    return (f"seed: 1\ntime_limit_s: 36000\nlink: {{rate_gbps: {RATE_GBPS}}}\n" + with_ina(text, switches) +
            f"jobs:\n  - {{name: fig10, algorithm: {algorithm}, workers: [{workers}]{ps}, elements: {elements}}}\n")


def order(atp, text, hosts, gen):
    """`atp bom --incremental`'s replacement order for this topology's job."""
    path = os.path.join(gen, "order.yaml")
    with open(path, "w") as f:
        f.write(scenario(text, hosts, "atp", 1000, set()))  # the order follows the tree towards its PS
    return experiment.replacement_order(experiment.run([atp, "bom", path, "--incremental"], "atp bom").stdout)


def main():
    def flags(parser):
        parser.add_argument("--topologies", default="fat-tree,dragonfly")
        parser.add_argument("--scale", type=int)
        parser.add_argument("--only", help="comma-separated configuration labels to run")

    a = experiment.arguments(__doc__, HERE, add=flags)
    atp = experiment.atp_binary()
    scale = a.scale or (4096 if a.smoke else 16)
    models = MODELS[:2] if a.smoke else MODELS
    names = ["fat-tree"] if a.smoke else a.topologies.split(",")
    table = [f"# ns-3, links {RATE_GBPS} Gbit/s, gradients / {scale}; allreduces per second (algbw Gbit/s); "
             "'failed' where a run was not correct"]
    with experiment.temp_dir() as gen, open(os.path.join(a.out, "times.txt"), "a") as times:
        for name in names:
            topo_args, half = TOPOLOGIES[name]
            text, hosts = topology(atp, topo_args)
            replacement = order(atp, text, hosts, gen)
            configs = [("ps", "ps", set()), ("ring", "ring", set()), ("hierarchical", "hierarchical", set()),
                       ("atp-50%", "atp", set(replacement[:half["atp"]])), ("atp-100%", "atp", None),
                       ("rina-50%", "rina", set(replacement[:half["rina"]])), ("rina-100%", "rina", None)]
            table.append(f"## {name}: {len(hosts) - 1} workers; 50%: ATP {', '.join(replacement[:half['atp']])}; "
                         f"Rina {', '.join(replacement[:half['rina']])}")
            table.append("%-12s %8s" % ("model", "MB") + "".join("%19s" % c[0] for c in configs) +
                         "  rina-50%/hier  rina-50%/atp-50%")
            for model, params in models:
                elements = params // scale
                rate = {}
                row = "%-12s %8.1f" % (model, elements * 4 / 1e6)
                for label, algorithm, switches in configs:
                    out = os.path.join(a.out, f"{name}-{model}-{label}.json")
                    if a.only and label not in a.only.split(","):
                        if not os.path.exists(out):
                            rate[label] = None
                            row += "%19s" % "-"
                            continue
                        with open(out) as f:
                            job = json.load(f)["jobs"][0]
                        if job["tensor_bytes"] != elements * 4:
                            experiment.fail(f"{out} is of another --scale ({job['tensor_bytes']} bytes, "
                                            f"not {elements * 4}): run that configuration again")
                    else:
                        path = os.path.join(gen, "run.yaml")
                        with open(path, "w") as f:
                            f.write(scenario(text, hosts, algorithm, elements, switches))
                        start = time.monotonic()
                        run = experiment.run([atp, "run", "--backend", "ns3", "--json", path],
                                             f"atp run on {name} {model} {label}", ok=(0, 1))
                        times.write(f"{name} {model} {label} {time.monotonic() - start:.0f} s\n")
                        times.flush()
                        with open(out, "w") as f:
                            f.write(run.stdout)
                        job = json.loads(run.stdout)["jobs"][0]
                    ok = job["correct"] and job["seconds"] > 0
                    rate[label] = 1 / job["seconds"] if ok else None
                    row += "%19s" % ("%.1f (%.1f)" % (rate[label], job["algbw_gbps"]) if ok else "failed")
                ratio = lambda x, y: "%.2fx" % (rate[x] / rate[y]) if rate.get(x) and rate.get(y) else "-"  # noqa: E731
                table.append(row + "  %13s  %16s" % (ratio("rina-50%", "hierarchical"), ratio("rina-50%", "atp-50%")))
                print(table[-1], flush=True)
    experiment.write_table(os.path.join(a.out, "table.txt"), table)


if __name__ == "__main__":
    main()
