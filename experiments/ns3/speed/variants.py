"""Scenario of the simulator-speed experiment (experiments/ns3/speed/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes speed.yaml (the file next to this script) to OUT_DIR; --smoke: the same 64 workers with
  50 fragments per round and 2 rounds (one untimed).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402


def main(argv):
    smoke, out = common.smoke_and_out_dir(argv, __doc__)
    doc = common.load_yaml(os.path.join(HERE, "speed.yaml"))
    if smoke:
        doc["jobs"][0]["elements"] = 62 * 50
        doc["jobs"][0]["rounds"] = 2
    common.write_yaml(doc, out, "speed", default_flow_style=None, width=120)


if __name__ == "__main__":
    main(sys.argv[1:])
