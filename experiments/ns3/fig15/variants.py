"""Scenario variants of the Fig. 15 reproduction (experiments/ns3/fig15/run.sh).

Usage:
  variants.py sweep [--smoke] OUT_DIR
      half-table.yaml with 64..192 aggregators, CC on, 4 rounds: sweep-<aggregators>.yaml
  variants.py runs [--smoke] RESULTS_DIR OUT_DIR
      reads RESULTS_DIR/sweep-*.json, picks the need (written to RESULTS_DIR/need.json) and writes
      cc-on-full.yaml (the need, CC on), cc-on-half.yaml and cc-off-half.yaml (half of it)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
TABLES = [64, 72, 80, 88, 96, 128, 192]
SMOKE_TABLES = [64, 128]
# A table is "at peak" when its throughput is within this fraction of the sweep's best.
PEAK_TOLERANCE = 0.02


def variant(aggregators, cc, smoke, rounds=None):
    doc = common.load_yaml(os.path.join(HERE, "half-table.yaml"))
    doc["topology"]["switches"][0]["aggregators"] = aggregators
    job = doc["jobs"][0]
    job["congestion_control"] = cc
    if rounds:
        job["rounds"] = rounds
    if smoke:
        job["elements"] = 20000
        job["rounds"] = 2
    return doc


def pick_need(results):
    points = common.sweep_points(results, "sweep-", lambda doc: doc["jobs"][0]["algbw_gbps"])
    best, need = common.smallest_at_peak(points, PEAK_TOLERANCE)
    return {
        "need": need,
        "half": need // 2,
        "best_algbw_gbps": best,
        "rule": f"smallest table within {PEAK_TOLERANCE:.0%} of the sweep's best algbw (one job, CC on, linear index)",
        "sweep": [{"aggregators": a, "algbw_gbps": g} for a, g in points],
    }


def main(argv):
    smoke, args = common.split_smoke(argv)
    if len(args) == 2 and args[0] == "sweep":
        for a in SMOKE_TABLES if smoke else TABLES:
            common.write_yaml(variant(a, True, smoke, rounds=4), args[1], f"sweep-{a}")
    elif len(args) == 3 and args[0] == "runs":
        need = pick_need(args[1])
        with open(os.path.join(args[1], "need.json"), "w") as f:
            json.dump(need, f, indent=2)
        common.write_yaml(variant(need["need"], True, smoke), args[2], "cc-on-full")
        common.write_yaml(variant(need["half"], True, smoke), args[2], "cc-on-half")
        common.write_yaml(variant(need["half"], False, smoke), args[2], "cc-off-half")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
