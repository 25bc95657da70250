"""Scenario variants of the Fig. 10 reproduction (experiments/ns3/fig10/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes <recovery>-<loss>-s<seed>.yaml: lossy-worker.yaml with loss_recovery atp | timeout, the
  loss rate in percent (0 = no fault) and the scenario seed (which also seeds the loss model).
  Rare losses get more seeds: at 0.001%, a run loses 2 packets on average.
"""
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
# loss rate (%) -> seeds
SEEDS = {0: 1, 0.001: 8, 0.003: 4, 0.01: 4, 0.03: 2, 0.1: 2, 0.3: 2, 1: 2}
SMOKE_SEEDS = {0: 1, 1: 1}


def main(argv):
    smoke = "--smoke" in argv
    args = [a for a in argv if a != "--smoke"]
    if len(args) != 1:
        sys.exit(__doc__)
    os.makedirs(args[0], exist_ok=True)
    for recovery in ["atp", "timeout"]:
        for percent, seeds in (SMOKE_SEEDS if smoke else SEEDS).items():
            for seed in range(1, seeds + 1):
                with open(os.path.join(HERE, "lossy-worker.yaml")) as f:
                    doc = yaml.safe_load(f)
                doc["seed"] = seed
                job = doc["jobs"][0]
                job["loss_recovery"] = recovery
                if smoke:
                    job["elements"] = 62 * 2000
                    job["rounds"] = 1
                if percent:
                    doc["faults"][0]["loss"] = percent / 100
                else:
                    del doc["faults"]
                name = f"{recovery}-{percent:g}-s{seed}.yaml"
                with open(os.path.join(args[0], name), "w") as f:
                    yaml.safe_dump(doc, f, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1:])
