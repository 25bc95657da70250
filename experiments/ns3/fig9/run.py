#!/usr/bin/python3
"""Paper Fig. 9 on ns-3: traffic into the PS with ATP's two-level aggregation, with the paper's
rack-scale solution (RSS) and with aggregation only at the workers' racks, at 100 Gbit/s.

Usage: experiments/ns3/fig9/run.py [--smoke] [OUT_DIR]
  full (about 30 s): JSON to experiments/ns3/fig9/results/, PNG to docs/img/ns3-fig9.png
  --smoke (a few seconds): tiny tensors; JSON and PNG only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNG go there instead.
Runs <scheme>-<index>.yaml for scheme two-level | rss | rack-only (the files next to this script)
and index linear (as they are) | hashed (the paper's aggregator indices); --smoke: 200 fragments
per round instead of 16,913, two rounds (one untimed).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

SCHEMES = ["two-level", "rss", "rack-only"]


def variants(smoke):
    docs = {}
    for scheme in SCHEMES:
        for index in ["linear", "hashed"]:
            doc = common.load_yaml(os.path.join(HERE, scheme + ".yaml"))
            job = doc["jobs"][0]
            job["index"] = index
            if smoke:
                job["elements"] = 62 * 200
                job["rounds"] = 2
            docs[f"{scheme}-{index}"] = doc
    return docs


def main():
    r = common.Reproduction(HERE, __doc__)
    r.run_all(variants(r.smoke))
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
