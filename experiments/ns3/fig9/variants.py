"""Scenario variants of the Fig. 9 reproduction (experiments/ns3/fig9/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes <scheme>-<index>.yaml for scheme two-level | rss | rack-only (the files next to this
  script) and index linear (as they are) | hashed (the paper's aggregator indices).
  --smoke: 200 fragments per round instead of 16,913, two rounds (one untimed).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
SCHEMES = ["two-level", "rss", "rack-only"]


def main(argv):
    smoke, out = common.smoke_and_out_dir(argv, __doc__)
    for scheme in SCHEMES:
        for index in ["linear", "hashed"]:
            doc = common.load_yaml(os.path.join(HERE, scheme + ".yaml"))
            job = doc["jobs"][0]
            job["index"] = index
            if smoke:
                job["elements"] = 62 * 200
                job["rounds"] = 2
            common.write_yaml(doc, out, f"{scheme}-{index}")


if __name__ == "__main__":
    main(sys.argv[1:])
