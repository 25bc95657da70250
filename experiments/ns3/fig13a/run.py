#!/usr/bin/python3
"""Paper Fig. 13a on ns-3: three jobs on one switch, ATP's dynamic sharing (its defaults: the switch
allocates; and the hashed and hashed_slots indices) vs SwitchML-style static shares, as the
aggregator table shrinks from 100% to 33% of the peak throughput aggregators; and the defaults vs
static shares where jobs compute longer than they communicate.

Usage: experiments/ns3/fig13a/run.py [--smoke] [OUT_DIR]
  full (about 12 minutes): JSON to experiments/ns3/fig13a/results/, PNGs to docs/img/ns3-fig13a*.png
  --smoke (a few seconds): tiny tensors; JSON and PNGs only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
Two stages:
  1. sweep: one-job.yaml and three-jobs.yaml (static, SwitchML-style) with 48..384 aggregators per
     job: sweep-alone-<share>.yaml and sweep-static-<share>.yaml (how many aggregators one job needs)
  2. compare: the PTA from the sweep's sweep-static-*.json (written to pta.json beside the JSON),
     three-jobs.yaml at 100%..33% of it for each scheme, plus ATP's dynamic schemes at 2x..16x:
     <scheme>-<percent>.yaml; and with compute phases longer than the allreduce (COMPUTE_US,
     started a third of one apart), static shares and ATP's defaults at 100%..33%:
     compute-<scheme>-<percent>.yaml; and the same two in other settings (SETTINGS) at 100% and 33%
     of their jobs' PTA: setting-<name>-<scheme>-<percent>.yaml
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

SHARES = [48, 64, 96, 128, 160, 192, 256, 384]  # aggregators per job in the sweeps
SMOKE_SHARES = [64, 192]
PERCENTS = [100, 83, 67, 50, 33]  # of the PTA, as in the paper's x axis
BEYOND = [200, 400, 800, 1600]  # ATP's hashed indices only: how far beyond the PTA they must go
# A share is "at peak" when its throughput is within this fraction of the sweep's best.
PEAK_TOLERANCE = 0.02

# scheme -> (aggregator_sharing, index). A static share also caps the job's window at its size
# (the simulator does it: SwitchML's pool of slots, one packet in flight per slot).
SCHEMES = {
    # ATP's defaults: the switch gives a fragment the aggregator free the longest and finds it by
    # <job, seq>; a job's window may grow to the whole table, and the table brake keeps a job over
    # an even share of a full table off it (docs/protocol.md, "Sharing the table").
    "dynamic-allocated": ("dynamic", "allocated"),
    "dynamic-hashed": ("dynamic", "hashed"),  # ATP, HASH(job, seq) as in the paper's text
    "static-linear": ("static", "linear"),  # SwitchML: own slots, one packet per slot
    "static-hashed": ("static", "hashed"),  # ATP's index inside fixed shares
    # The authors' code: (home + seq mod slots), each job's slots and window at a third of the
    # table, starting on a third of its own; collisions move to the aggregator the switch offers.
    # ATP's default until 2026-11-28.
    "dynamic-hashed_slots": ("dynamic", "hashed_slots"),
}
DYNAMIC = ["dynamic-hashed", "dynamic-hashed_slots", "dynamic-allocated"]
# The paper's "heavy contention": jobs that compute at least as long as they communicate (an
# allreduce here takes 0.4-0.8 ms), started a third of a compute phase apart.
COMPUTE_US = 1000
COMPUTE_SCHEMES = ["static-linear", "dynamic-allocated"]
# Settings that differ from the paper's: name -> (tensor elements per job, compute_us, start_us
# per job). A table of 100% holds each job's static PTA share (pta.json's share_per_job).
SETTINGS = {
    "sizes": ([125000, 500000, 2000000], 200, [0, 67, 133]),  # 0.5, 2 and 8 MB
    "lockstep": ([500000] * 3, 200, [0, 0, 0]),  # the same phases
    "six-jobs": ([500000] * 6, 200, [0, 33, 67, 100, 133, 167]),
    "eight-mixed": ([250000, 1000000] * 4, 500, [0, 63, 125, 188, 250, 313, 375, 438]),  # 1 / 4 MB
}


def load(name):
    return common.load_yaml(os.path.join(HERE, name))


def shrink(doc):
    """The smoke version: tiny tensors, 1 warm-up and 1 timed round."""
    for job in doc["jobs"]:
        job["elements"] = 20000
        job["rounds"] = 2
        job["warmup_rounds"] = 1
    return doc


def configure(doc, table, scheme):
    sharing, index = SCHEMES[scheme]
    doc["aggregator_sharing"] = sharing
    doc["topology"]["switches"][0]["aggregators"] = table
    for job in doc["jobs"]:
        job["index"] = index
    return doc


def sweep(smoke):
    """{name: scenario} of the sweep: one job alone and three with static shares, per share."""
    docs = {}
    for share in SMOKE_SHARES if smoke else SHARES:
        alone = load("one-job.yaml")
        configure(alone, share, "static-linear")
        docs[f"sweep-alone-{share}"] = shrink(alone) if smoke else alone
        three = load("three-jobs.yaml")
        configure(three, 3 * share, "static-linear")
        docs[f"sweep-static-{share}"] = shrink(three) if smoke else three
    return docs


def pick_pta(results):
    """The smallest static share within PEAK_TOLERANCE of the sweep's best throughput, times 3."""
    points = common.sweep_points(results, "sweep-static-", lambda doc: common.iterations_per_second(doc["jobs"]))
    best, share = common.smallest_at_peak(points, PEAK_TOLERANCE)
    return {
        "share_per_job": share,
        "pta": 3 * share,
        "best_iterations_per_second": best,
        "rule": f"smallest static share per job within {PEAK_TOLERANCE:.0%} of the best mean "
        "iterations/s of the three-job static sweep; PTA = 3 x that share",
        "sweep": [{"share": s, "iterations_per_second": r} for s, r in points],
    }


def compare(smoke, pta):
    """{name: scenario} of every scheme at the percentages of the PTA (pick_pta's)."""
    docs = {}
    percents = [100, 33] if smoke else PERCENTS
    runs = [(s, p) for s in SCHEMES for p in percents]
    if not smoke:
        runs += [(s, p) for s in DYNAMIC for p in BEYOND]
    for scheme, percent in runs:
        if smoke and scheme == "static-hashed":
            continue
        doc = configure(load("three-jobs.yaml"), round(pta["pta"] * percent / 100), scheme)
        docs[f"{scheme}-{percent}"] = shrink(doc) if smoke else doc
    for scheme in COMPUTE_SCHEMES:
        for percent in percents:
            doc = configure(load("three-jobs.yaml"), round(pta["pta"] * percent / 100), scheme)
            for k, job in enumerate(doc["jobs"]):
                job["compute_us"] = COMPUTE_US
                job["start_us"] = round(k * COMPUTE_US / 3)
            docs[f"compute-{scheme}-{percent}"] = shrink(doc) if smoke else doc
    for name, (sizes, compute_us, starts) in SETTINGS.items():
        for scheme in COMPUTE_SCHEMES:
            for percent in [100, 33]:
                doc = load("three-jobs.yaml")
                model = doc["jobs"][0]
                doc["jobs"] = [dict(model, name=f"job{k + 1}", elements=n, compute_us=compute_us, start_us=start)
                               for k, (n, start) in enumerate(zip(sizes, starts))]
                table = round(len(sizes) * pta["share_per_job"] * percent / 100)
                configure(doc, table, scheme)
                docs[f"setting-{name}-{scheme}-{percent}"] = shrink(doc) if smoke else doc
    return docs


def main():
    r = common.Reproduction(HERE, __doc__)
    # 1. How many aggregators one job needs: one job alone, and three jobs with static shares.
    r.run_all(sweep(r.smoke), stage="sweep")
    # 2. The PTA from the sweep, then every scheme at 100% .. 33% of it.
    pta = pick_pta(r.results)
    with open(os.path.join(r.results, "pta.json"), "w") as f:
        json.dump(pta, f, indent=2)
    r.run_all(compare(r.smoke, pta), stage="compare")
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
