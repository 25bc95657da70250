#!/usr/bin/python3
"""Paper Fig. 10 on ns-3: loss from 0.001% to 1% on one worker's link, throughput normalised to no
loss, ATP's loss recovery vs recovery by a 1 ms timeout alone (SwitchML's); congestion control off.

Usage: experiments/ns3/fig10/run.py [--smoke] [OUT_DIR]
  full (about 3 minutes): JSON to experiments/ns3/fig10/results/, PNGs to docs/img/ns3-fig10*.png
  --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
Runs <recovery>-<loss>-s<seed>.yaml: lossy-worker.yaml with loss_recovery atp | timeout, the loss
rate in percent (0 = no fault) and the scenario seed (which also seeds the loss model). Rare
losses get more seeds: at 0.001%, a run loses 2 packets on average.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

# loss rate (%) -> seeds
SEEDS = {0: 1, 0.001: 8, 0.003: 4, 0.01: 4, 0.03: 2, 0.1: 2, 0.3: 2, 1: 2}
SMOKE_SEEDS = {0: 1, 1: 1}


def variants(smoke):
    docs = {}
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
                docs[f"{recovery}-{percent:g}-s{seed}"] = doc
    return docs


def main():
    r = common.Reproduction(HERE, __doc__)
    r.run_all(variants(r.smoke))
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
