#!/usr/bin/python3
"""Paper Fig. 15 on ns-3: one 8-worker job with half the aggregators it needs (an incast of
unaggregated packets on the PS's link), ATP's congestion control on vs off, over time (--series).

Usage: experiments/ns3/fig15/run.py [--smoke] [OUT_DIR]
  full (about 1 minute): JSON to experiments/ns3/fig15/results/, PNGs to docs/img/ns3-fig15*.png
  --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
Two stages:
  1. sweep-<aggregators>.yaml: half-table.yaml with 64..192 aggregators, CC on, 4 rounds: how many
     aggregators the job needs for its peak (the need, written to need.json beside the JSON)
  2. cc-on-full.yaml (the need, CC on), cc-on-half.yaml and cc-off-half.yaml (half of it), with a
     time series every 50 us (--smoke: 10 us)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

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


def main():
    r = common.Reproduction(HERE, __doc__)
    # 1. How many aggregators the job needs for its peak (CC on).
    r.run_all({f"sweep-{a}": variant(a, True, r.smoke, rounds=4) for a in (SMOKE_TABLES if r.smoke else TABLES)},
              stage="sweep")
    # 2. Half of that, CC on and off, with a time series.
    need = pick_need(r.results)
    with open(os.path.join(r.results, "need.json"), "w") as f:
        json.dump(need, f, indent=2)
    runs = {"cc-on-full": variant(need["need"], True, r.smoke), "cc-on-half": variant(need["half"], True, r.smoke),
            "cc-off-half": variant(need["half"], False, r.smoke)}
    r.run_all(runs, "--series", "0.01" if r.smoke else "0.05", stage="runs")
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
