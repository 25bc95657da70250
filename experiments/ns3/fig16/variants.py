"""Scenario variants of the Fig. 16 reproduction (experiments/ns3/fig16/run.sh).

Usage: variants.py [--smoke] OUT_DIR
  writes, from fig16.yaml:
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
THRESHOLDS = [400, 600, 800, 1000]


def main(argv):
    smoke, out = common.smoke_and_out_dir(argv, __doc__)
    base = common.load_yaml(os.path.join(HERE, "fig16.yaml"))
    if smoke:
        base["time_limit_s"] = 0.003
        base["jobs"][0]["start_us"] = 500
        base["jobs"][0]["elements"] = 62 * 1000
    variants = {"cc-on": copy.deepcopy(base)}
    variants["alone"] = copy.deepcopy(base)
    del variants["alone"]["background"]
    variants["cc-off"] = copy.deepcopy(base)
    variants["cc-off"]["jobs"][0]["congestion_control"] = False
    if not smoke:
        variants["reno"] = copy.deepcopy(base)
        variants["reno"]["background"][0]["congestion"] = "reno"
        for k in THRESHOLDS:
            doc = copy.deepcopy(base)
            doc["link"]["ecn_threshold_packets"] = k
            variants[f"ecn-{k}"] = doc
    for name, doc in variants.items():
        common.write_yaml(doc, out, name)


if __name__ == "__main__":
    main(sys.argv[1:])
