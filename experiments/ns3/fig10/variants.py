"""Scenario variants of the Fig. 10 reproduction (experiments/ns3/fig10/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes <recovery>-<loss>-s<seed>.yaml: lossy-worker.yaml with loss_recovery atp | timeout, the
  loss rate in percent (0 = no fault) and the scenario seed (which also seeds the loss model).
  Rare losses get more seeds: at 0.001%, a run loses 2 packets on average.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
# loss rate (%) -> seeds
SEEDS = {0: 1, 0.001: 8, 0.003: 4, 0.01: 4, 0.03: 2, 0.1: 2, 0.3: 2, 1: 2}
SMOKE_SEEDS = {0: 1, 1: 1}


def main(argv):
    smoke, out = common.smoke_and_out_dir(argv, __doc__)
    for recovery in ["atp", "timeout"]:
        for percent, seeds in (SMOKE_SEEDS if smoke else SEEDS).items():
            for seed in range(1, seeds + 1):
                doc = common.load_yaml(os.path.join(HERE, "lossy-worker.yaml"))
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
                common.write_yaml(doc, out, f"{recovery}-{percent:g}-s{seed}")


if __name__ == "__main__":
    main(sys.argv[1:])
