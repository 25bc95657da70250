#!/usr/bin/python3
"""Paper Fig. 14 on ns-3: 1 to 8 jobs on one switch with 100% of their peak throughput aggregators:
ATP's defaults (the switch allocates) and hashed indices (HASH(job, seq), the authors'
hashed_slots) vs linear indices over the shared table vs SwitchML-style static shares.

Usage: experiments/ns3/fig14/run.py [--smoke] [OUT_DIR]
  full (about 3 minutes): JSON to experiments/ns3/fig14/results/, PNGs to docs/img/ns3-fig14*.png
  --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
Runs <scheme>-<n>.yaml: the first n jobs of jobs.yaml (n = 1..8; smoke: 1 and 2 with tiny
tensors) on a table of n x PTA_PER_JOB aggregators, for each scheme, with per-job goodput every
50 us (--series; smoke: 10 us): the plot averages it while all n jobs run.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

# One job's peak throughput aggregators at 100 Gbit/s, 4 workers, these links: the sweep of
# experiments/ns3/fig13a (docs/ns3-reproductions-aggregation.md), where a job alone stops
# gaining throughput at 192 aggregators.
PTA_PER_JOB = 192

# scheme -> (aggregator_sharing, index). A static share also caps the job's window at its size
# (the simulator does it: SwitchML's pool of slots, one packet in flight per slot).
SCHEMES = {
    "hashed": ("dynamic", "hashed"),  # ATP, HASH(job, seq) as in the paper's text
    "linear": ("dynamic", "linear"),  # index = seq % N over the shared table
    "static": ("static", "linear"),  # SwitchML: own slots, one packet per slot
    # The authors' code: (home + seq mod slots), each job's slots and window at its part of the
    # table (n x 192 / n), starting on a part of its own; collisions move to the aggregator the
    # switch offers. ATP's default until 2026-11-28.
    "hashed_slots": ("dynamic", "hashed_slots"),
    # ATP's defaults: the switch allocates (docs/protocol.md, "Sharing the table").
    "allocated": ("dynamic", "allocated"),
}


def variant(n, scheme, smoke):
    doc = common.load_yaml(os.path.join(HERE, "jobs.yaml"))
    sharing, index = SCHEMES[scheme]
    doc["aggregator_sharing"] = sharing
    doc["topology"]["switches"][0]["aggregators"] = n * PTA_PER_JOB
    doc["jobs"] = doc["jobs"][:n]
    for job in doc["jobs"]:
        job["index"] = index
        if smoke:
            job["elements"] = 20000
            job["rounds"] = 2
    return doc


def main():
    r = common.Reproduction(HERE, __doc__)
    docs = {f"{scheme}-{n}": variant(n, scheme, r.smoke) for scheme in SCHEMES
            for n in ([1, 2] if r.smoke else range(1, 9))}
    r.run_all(docs, "--series", "0.01" if r.smoke else "0.05")
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
