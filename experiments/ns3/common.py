"""Helpers shared by the ns-3 reproductions' variants.py and plot.py (experiments/ns3/NAME/).

They import it with the parent folder on sys.path:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import common  # noqa: E402
"""
import glob
import json
import os
import sys

import yaml

# What a fragment of the paper's 62 values takes on an ns-3 link: 248 value bytes + the 40-byte
# ATP header + 42 bytes of Ethernet/IPv4/UDP (ns-3's 2-byte PPP header and a 12-byte gap, paced as
# an Ethernet frame; docs/ns3.md). ATP's algbw is at most the link x ATP_EFFICIENCY.
ATP_WIRE_BYTES = 248 + 40 + 42
ATP_EFFICIENCY = 248 / ATP_WIRE_BYTES
# A full TCP segment of ns-3's TCP: 1448 payload + TCP 20 + timestamps 12 + IPv4 20 + 14 (PPP + gap).
TCP_SEGMENT_WIRE_BYTES = 1448 + 20 + 12 + 20 + 14
TCP_EFFICIENCY = 1448 / TCP_SEGMENT_WIRE_BYTES


def split_smoke(argv):
    """(whether --smoke is among argv, the other arguments)"""
    return "--smoke" in argv, [a for a in argv if a != "--smoke"]


def smoke_and_out_dir(argv, usage):
    """The arguments `[--smoke] OUT_DIR` of a variants.py: (smoke, OUT_DIR), the folder created;
    exits with usage for any others."""
    smoke, args = split_smoke(argv)
    if len(args) != 1:
        sys.exit(usage)
    os.makedirs(args[0], exist_ok=True)
    return smoke, args[0]


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def write_yaml(doc, out, name, **dump_options):
    """Writes doc to OUT/name.yaml (OUT created if needed), its keys in their order."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".yaml"), "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False, **dump_options)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def load_result(results, name):
    """RESULTS/name.json, or None if the run is not there."""
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    return load_json(path)


def sweep_points(results, prefix, value):
    """[(N, value(doc))] sorted by N for every RESULTS/<prefix>N.json; exits if there is none (a
    variants.py whose sweep has not run)."""
    points = []
    for path in glob.glob(os.path.join(results, prefix + "*.json")):
        points.append((int(os.path.basename(path)[len(prefix) : -len(".json")]), value(load_json(path))))
    if not points:
        sys.exit(f"variants.py: no {prefix}*.json in {results}; run the sweep first")
    return sorted(points)


def smallest_at_peak(points, tolerance):
    """(best y, the smallest x whose y is within tolerance of it) of [(x, y)], sorted by x."""
    best = max(y for _, y in points)
    return best, next(x for x, y in points if y >= (1 - tolerance) * best)


def iterations_per_second(jobs):
    """Mean over the jobs of timed iterations per simulated second (the paper's training throughput)."""
    # Timed rounds over timed seconds (0 for a job that never finished a timed round).
    rates = [(j["completed_rounds"] - j["warmup_rounds"]) / j["seconds"] if j["seconds"] else 0.0 for j in jobs]
    return sum(rates) / len(rates)


def plot_dirs(argv, usage):
    """The arguments `RESULTS_DIR IMAGE_DIR` of a plot.py, or exits with usage."""
    if len(argv) != 2:
        sys.exit(usage)
    return argv[0], argv[1]


def pyplot():
    """matplotlib.pyplot drawing to files only (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
