#!/usr/bin/python3
"""Multi-rack allreduce on ns-3 at 100 Gbit/s: ATP vs a PS without in-network aggregation vs ring
allreduce over TCP, 2 to 16 racks of 8 workers, and ATP with hashed indices on 3 table sizes.

Usage: experiments/ns3/scale/run.py [--smoke] [OUT_DIR]
  full (about 4 minutes): JSON to experiments/ns3/scale/results/, PNGs to docs/img/ns3-scale*.png
  --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
Runs, from scale.yaml (its link and job settings, a topology rebuilt per size):
  r<R>-<algorithm>.yaml   R = 2, 4, 8, 16 racks of 8 workers; algorithm atp, ring, and ps for
                          at most 32 workers (beyond, it moves n times ATP's packets and would take
                          most of the sweep's wall time; the planner takes it since 61369d8)
  hashed-a<N>.yaml        2 racks, ATP with the paper's hashed indices on N = 4096, 16384,
                          65536 aggregators per switch
  --smoke: racks of 2 workers, R = 2 and 4, hashed at 4096 only, 100 fragments, 2 rounds.
"""
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

RACKS = [2, 4, 8, 16]
TABLES = [4096, 16384, 65536]
MAX_PS_WORKERS = 32


def build(base, racks, per_rack, algorithm, aggregators=None, index=None):
    doc = copy.deepcopy(base)
    table = aggregators or base["topology"]["switches"][0]["aggregators"]
    workers = [f"w{i}" for i in range(racks * per_rack)]
    doc["topology"] = {
        "switches": [{"name": "core", "aggregators": table}] +
                    [{"name": f"tor{r}", "aggregators": table} for r in range(racks)],
        "hosts": [{"name": "ps", "switch": "core"}] +
                 [{"name": w, "switch": f"tor{i // per_rack}"} for i, w in enumerate(workers)],
        "links": [[f"tor{r}", "core"] for r in range(racks)],
    }
    template = base["faults"][0]  # the PS's NIC: the same settings for every host
    doc["faults"] = [dict(template, link=[h["name"], h["switch"]]) for h in doc["topology"]["hosts"]]
    job = doc["jobs"][0]
    job["workers"] = workers
    job["algorithm"] = algorithm
    if algorithm == "ring":  # TCP between the workers: no PS, none of ATP's packet settings
        for key in ["ps", "values_per_packet", "index", "magnitude"]:
            job.pop(key, None)
    if index:
        job["index"] = index
    return doc


def variants(smoke):
    base = common.load_yaml(os.path.join(HERE, "scale.yaml"))
    per_rack = 8
    racks, tables = RACKS, TABLES
    if smoke:
        per_rack, racks, tables = 2, [2, 4], [4096]
        base["jobs"][0]["elements"] = 62 * 100
        base["jobs"][0]["rounds"] = 2
    docs = {}
    for r in racks:
        for algorithm in ["atp", "ps", "ring"]:
            if algorithm == "ps" and r * per_rack > MAX_PS_WORKERS:
                continue
            docs[f"r{r}-{algorithm}"] = build(base, r, per_rack, algorithm)
    for n in tables:
        docs[f"hashed-a{n}"] = build(base, 2, per_rack, "atp", aggregators=n, index="hashed")
    return docs


def main():
    r = common.Reproduction(HERE, __doc__)
    r.run_all(variants(r.smoke), default_flow_style=None, width=120)
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
