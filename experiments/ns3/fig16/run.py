#!/usr/bin/python3
"""Paper Fig. 16 on ns-3: an ATP job and a TCP flow share the link to one worker at 100 Gbit/s,
ATP's congestion control on and off, and on with higher ECN thresholds; goodput over time.

Usage: experiments/ns3/fig16/run.py [--smoke] [OUT_DIR]
  full (about 2.5 minutes): JSON to experiments/ns3/fig16/results/, PNGs to docs/img/ns3-fig16*.png
  --smoke (a few seconds): a 3 ms run; JSON and PNGs only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNGs go there instead.
Runs, from fig16.yaml, with goodput samples every 0.5 ms (--smoke: 0.1 ms; the job's --series, and
the TCP flow uses the same interval):
  alone.yaml       the job without the TCP flow (its peak goodput, the paper's dashed line)
  cc-on.yaml       ATP's congestion control on, ECN above 200 packets (fig16.yaml as it is)
  cc-off.yaml      the same with congestion_control: false (the window stays at 200 packets)
  ecn-<K>.yaml     CC on, ECN above K = 400, 600, 800, 1000 packets (1000: only a full buffer)
  reno.yaml        CC on, ECN above 200, the flow's TCP Reno (ns-3's TcpLinuxReno, ECN-capable)
                   instead of ns-3's CUBIC, which has no TCP-friendly region
  --smoke: alone, cc-on and cc-off only, a 3 ms run, the job from 0.5 ms, 10 rounds of 248 KB.
"""
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import plot  # noqa: E402

THRESHOLDS = [400, 600, 800, 1000]
# A job that does not finish within the time limit (exit 1: ATP starved by the flow) is recorded,
# not fatal: its JSON has the series.
INCOMPLETE = "the job did not complete within the time limit (see its JSON)"


def variants(smoke):
    base = common.load_yaml(os.path.join(HERE, "fig16.yaml"))
    if smoke:
        base["time_limit_s"] = 0.003
        base["jobs"][0]["start_us"] = 500
        base["jobs"][0]["elements"] = 62 * 1000
    docs = {"cc-on": copy.deepcopy(base)}
    docs["alone"] = copy.deepcopy(base)
    del docs["alone"]["background"]
    docs["cc-off"] = copy.deepcopy(base)
    docs["cc-off"]["jobs"][0]["congestion_control"] = False
    if not smoke:
        docs["reno"] = copy.deepcopy(base)
        docs["reno"]["background"][0]["congestion"] = "reno"
        for k in THRESHOLDS:
            doc = copy.deepcopy(base)
            doc["link"]["ecn_threshold_packets"] = k
            docs[f"ecn-{k}"] = doc
    return docs


def main():
    r = common.Reproduction(HERE, __doc__)
    r.run_all(variants(r.smoke), "--series", "0.1" if r.smoke else "0.5", incomplete=INCOMPLETE)
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
