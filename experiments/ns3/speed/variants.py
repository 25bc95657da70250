"""Scenario of the simulator-speed experiment (experiments/ns3/speed/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes speed.yaml (the file next to this script) to OUT_DIR; --smoke: the same 64 workers with
  50 fragments per round and 2 rounds (one untimed).
"""
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    smoke = "--smoke" in argv
    args = [a for a in argv if a != "--smoke"]
    if len(args) != 1:
        sys.exit(__doc__)
    os.makedirs(args[0], exist_ok=True)
    with open(os.path.join(HERE, "speed.yaml")) as f:
        doc = yaml.safe_load(f)
    if smoke:
        doc["jobs"][0]["elements"] = 62 * 50
        doc["jobs"][0]["rounds"] = 2
    with open(os.path.join(args[0], "speed.yaml"), "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False, default_flow_style=None, width=120)


if __name__ == "__main__":
    main(sys.argv[1:])
