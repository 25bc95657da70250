"""Scenario variants of the Fig. 15 reproduction (experiments/ns3/fig15/run.sh).

Usage:
  variants.py sweep [--smoke] OUT_DIR
      half-table.yaml with 64..192 aggregators, CC on, 4 rounds: sweep-<aggregators>.yaml
  variants.py runs [--smoke] RESULTS_DIR OUT_DIR
      reads RESULTS_DIR/sweep-*.json, picks the need (written to RESULTS_DIR/need.json) and writes
      cc-on-full.yaml (the need, CC on), cc-on-half.yaml and cc-off-half.yaml (half of it)
"""
import glob
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TABLES = [64, 72, 80, 88, 96, 128, 192]
SMOKE_TABLES = [64, 128]
# A table is "at peak" when its throughput is within this fraction of the sweep's best.
PEAK_TOLERANCE = 0.02


def variant(aggregators, cc, smoke, rounds=None):
    with open(os.path.join(HERE, "half-table.yaml")) as f:
        doc = yaml.safe_load(f)
    doc["topology"]["switches"][0]["aggregators"] = aggregators
    job = doc["jobs"][0]
    job["congestion_control"] = cc
    if rounds:
        job["rounds"] = rounds
    if smoke:
        job["elements"] = 20000
        job["rounds"] = 2
    return doc


def write(doc, out, name):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".yaml"), "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)


def pick_need(results):
    points = []
    for path in glob.glob(os.path.join(results, "sweep-*.json")):
        with open(path) as f:
            doc = json.load(f)
        points.append((int(os.path.basename(path)[len("sweep-") : -len(".json")]), doc["jobs"][0]["algbw_gbps"]))
    if not points:
        sys.exit(f"variants.py: no sweep-*.json in {results}; run the sweep first")
    points.sort()
    best = max(g for _, g in points)
    need = next(a for a, g in points if g >= (1 - PEAK_TOLERANCE) * best)
    return {
        "need": need,
        "half": need // 2,
        "best_algbw_gbps": best,
        "rule": f"smallest table within {PEAK_TOLERANCE:.0%} of the sweep's best algbw (one job, CC on, linear index)",
        "sweep": [{"aggregators": a, "algbw_gbps": g} for a, g in points],
    }


def main(argv):
    smoke = "--smoke" in argv
    args = [a for a in argv if a != "--smoke"]
    if len(args) == 2 and args[0] == "sweep":
        for a in SMOKE_TABLES if smoke else TABLES:
            write(variant(a, True, smoke, rounds=4), args[1], f"sweep-{a}")
    elif len(args) == 3 and args[0] == "runs":
        need = pick_need(args[1])
        with open(os.path.join(args[1], "need.json"), "w") as f:
            json.dump(need, f, indent=2)
        write(variant(need["need"], True, smoke), args[2], "cc-on-full")
        write(variant(need["half"], True, smoke), args[2], "cc-on-half")
        write(variant(need["half"], False, smoke), args[2], "cc-off-half")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
