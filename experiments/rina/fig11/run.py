#!/usr/bin/python3
"""Rina's Fig. 11 (its §VI-C) on ns-3: the switches of a k=4 fat-tree made aggregating one at a
time in Rina's order (`atp bom --incremental`, its §IV-D), an ATP job and a Rina job measured
packet by packet after each replacement, beside the bandwidth-occupation model's prediction.

Usage: experiments/rina/fig11/run.py [--smoke] [OUT_DIR]
  full (16 minutes on 2 cores, 8 of them the ring's): ResNet50's gradient (25557032 float32
    values, 97.5 MiB) per worker, one scenario run per step and algorithm; JSON, bom.txt,
    table.txt, times.txt and fig11.png (or a text chart where matplotlib is missing) to
    experiments/rina/fig11/results/
  --smoke (10 seconds): the same steps with 500000 values; into OUT_DIR (default: a new temp
    dir). OUT_DIR without --smoke: the full run's files go there instead. ELEMENTS=N sets
    the float32 values per worker instead.
"""
import glob
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402
import plot  # noqa: E402

# ResNet50's 25,557,032 parameters: the paper's "98MB". Every link 100 Gbit/s (the paper's
# testbed ports; left unset, ns-3's links run at 10 Tbit/s and no link is a bottleneck), the
# scenario defaults otherwise (2 us; switch ports hold 1 MB and mark ECN from a depth sized for the rate).
ELEMENTS, SMOKE_ELEMENTS = 25557032, 500000
RATE_GBPS = 100


def scenario(text, hosts, elements, algorithm, switches):
    """The fat-tree with these switches aggregating (atp: true) and one job of ALGORITHM on every
    host but the last (which is ATP's PS)."""
    ina = text[re.search(r"^topology:", text, re.M).start():]
    for switch in switches:
        ina = re.sub(rf"^(    - {{name: {re.escape(switch)}, atp: )false}}", r"\1true}", ina, flags=re.M)
    if ina.count("atp: true}") != len(switches):
        experiment.fail(f"could not make {' '.join(switches)} aggregating in the fat-tree from atp topology")
    ps = f", ps: [{hosts[-1]}]" if algorithm == "atp" else ""
    return (f"link: {{rate_gbps: {RATE_GBPS}}}\n" + ina +
            f"jobs:\n  - {{name: fig11, algorithm: {algorithm}, workers: [{', '.join(hosts[:-1])}]{ps}, "
            f"elements: {elements}}}\n")


def run_one(atp, out, name, path):
    """Runs it on ns-3 into OUT/NAME.json, its wall time into OUT/times.txt. A job that fails
    (exit 1) is recorded, its scenario kept beside its JSON (OUT/NAME.yaml); anything else (a bad
    file, a crash) stops the experiment."""
    start = int(time.time())
    done = experiment.run([atp, "run", "--backend", "ns3", "--json", path], f"atp run on {name}", ok=(0, 1),
                          stdout=os.path.join(out, name + ".json"))
    with open(os.path.join(out, "times.txt"), "a") as f:
        f.write(f"{name} {int(time.time()) - start} s\n")
    if done.returncode == 1:
        with open(path) as src:
            experiment.write_text(os.path.join(out, name + ".yaml"), src.read())
        print(f"{experiment.script_name()}: {name}: a job did not complete correctly "
              f"(see {out}/{name}.json, {out}/{name}.yaml)", file=sys.stderr)


def main():
    args = experiment.arguments(__doc__, HERE)
    atp = experiment.atp_binary()
    out = args.out
    elements = int(os.environ.get("ELEMENTS", SMOKE_ELEMENTS if args.smoke else ELEMENTS))
    text, hosts = experiment.topology(atp, "fat-tree", "--k", "4")
    with experiment.temp_dir() as gen:
        # The model and the replacement order: the "+ SWITCH" rows of the incremental table.
        path = os.path.join(gen, "fig11.yaml")
        experiment.write_text(path, scenario(text, hosts, elements, "atp", []))
        bom = experiment.run([atp, "bom", path, "--incremental"], "atp bom").stdout.replace(gen + "/", "")
        experiment.write_text(os.path.join(out, "bom.txt"), bom)
        order = experiment.replacement_order(bom)
        if not order:
            experiment.fail(f"no replacement order in {out}/bom.txt")
        # An earlier run's files in OUT_DIR go: a shorter order would leave steps behind.
        for pattern in ["times.txt", "atp-[0-9]*.*", "rina-[0-9]*.*", "ring.*"]:
            for stale in glob.glob(os.path.join(out, pattern)):
                os.remove(stale)
        path = os.path.join(gen, "ring.yaml")
        experiment.write_text(path, scenario(text, hosts, elements, "ring", []))
        run_one(atp, out, "ring", path)
        for step in range(len(order) + 1):
            for algorithm in ["atp", "rina"]:
                name = f"{algorithm}-{step:02d}"
                path = os.path.join(gen, name + ".yaml")
                experiment.write_text(path, scenario(text, hosts, elements, algorithm, order[:step]))
                run_one(atp, out, name, path)
    plot.main([out, str(RATE_GBPS)])
    print(f"{experiment.script_name()}: results in {out}")


if __name__ == "__main__":
    main()
