"""Scenario variants of the Fig. 9 reproduction (experiments/ns3/fig9/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes <scheme>-<index>.yaml for scheme two-level | rss | rack-only (the files next to this
  script) and index linear (as they are) | hashed (the paper's aggregator indices).
  --smoke: 200 fragments per round instead of 16,913, two rounds (one untimed).
"""
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMES = ["two-level", "rss", "rack-only"]


def main(argv):
    smoke = "--smoke" in argv
    args = [a for a in argv if a != "--smoke"]
    if len(args) != 1:
        sys.exit(__doc__)
    os.makedirs(args[0], exist_ok=True)
    for scheme in SCHEMES:
        for index in ["linear", "hashed"]:
            with open(os.path.join(HERE, scheme + ".yaml")) as f:
                doc = yaml.safe_load(f)
            job = doc["jobs"][0]
            job["index"] = index
            if smoke:
                job["elements"] = 62 * 200
                job["rounds"] = 2
            with open(os.path.join(args[0], f"{scheme}-{index}.yaml"), "w") as f:
                yaml.safe_dump(doc, f, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1:])
