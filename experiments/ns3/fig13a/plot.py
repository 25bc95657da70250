"""Plots of the Fig. 13a reproduction (experiments/ns3/fig13a/run.py): reads its JSON, writes PNGs.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig13a-sweep.png  the sweep that finds one job's need (the PTA)
  ns3-fig13a.png        training throughput per job and in-switch share vs % of the PTA
  ns3-fig13a-compute.png  the same with compute phases longer than the allreduce
Also prints the numbers as a Markdown table (docs/ns3-reproductions-aggregation.md).
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

LABELS = {
    "dynamic-allocated": "ATP's defaults: dynamic sharing, the switch allocates, table brake",
    "dynamic-hashed": "ATP: dynamic sharing, hashed index",
    "static-linear": "static shares, linear index, window <= share (SwitchML)",
    "static-hashed": "static shares, hashed index, window <= share",
    "dynamic-hashed_slots": "dynamic sharing, hashed_slots (authors' code), each job at its third",
}


def summary(doc):
    """Mean over jobs: timed iterations per simulated second, algbw (Gbit/s), in-switch share."""
    jobs = doc["jobs"]
    return {
        "ips": common.iterations_per_second(jobs),
        "algbw": sum(j["algbw_gbps"] for j in jobs) / len(jobs),
        "in_net": sum(j["in_network_share"] for j in jobs) / len(jobs),
        "collisions": sum(j["collisions"] for j in jobs),
        "correct": all(j["correct"] for j in jobs),
        "aggregators": None,
    }


def points(results, prefix):
    """{number after prefix: summary} for RESULTS/prefix<number>.json."""
    out = {}
    for path in glob.glob(os.path.join(results, prefix + "*.json")):
        key = os.path.basename(path)[len(prefix) : -len(".json")]
        if key.isdigit():
            out[int(key)] = summary(common.load_json(path))
    return dict(sorted(out.items()))


def plot_sweep(results, images, pta):
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for prefix, label in [("sweep-alone-", "one job alone"), ("sweep-static-", "three jobs, static shares")]:
        p = points(results, prefix)
        ax.plot(list(p), [v["ips"] for v in p.values()], marker="o", label=label)
    ax.axvline(pta["share_per_job"], color="gray", linestyle="--", linewidth=1,
               label=f"chosen share: {pta['share_per_job']} (PTA = {pta['pta']})")
    ax.set_xlabel("aggregators per job (linear index, window <= aggregators)")
    ax.set_ylabel("iterations / s per job")
    ax.set_title("Fig. 13a step 1: one job's need (ns-3, 100 Gbit/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(images, "ns3-fig13a-sweep.png"), dpi=120)


def plot_compare(results, images, pta, prefix="", title="Fig. 13a: 3 jobs, one switch (ns-3)",
                 name="ns3-fig13a.png"):
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for scheme, label in LABELS.items():
        p = points(results, prefix + scheme + "-")
        if not p:
            continue
        xs = list(p)
        ax.plot(xs, [v["ips"] for v in p.values()], marker="o", label=label)
        ax2.plot(xs, [v["in_net"] * 100 for v in p.values()], marker="o", label=label)
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_xticks([33, 50, 67, 100, 200, 400, 800, 1600])
        a.set_xticklabels(["33", "50", "67", "100", "200", "400", "800", "1600"])
        a.minorticks_off()
        a.invert_xaxis()  # the paper's axis: from 100% down to 33%
        a.axvline(100, color="gray", linestyle=":", linewidth=1)
        a.set_xlabel(f"aggregators, % of PTA ({pta['pta']} = 100%)")
        a.grid(True, alpha=0.3)
        a.set_ylim(bottom=0)
    ax.set_ylabel("training throughput (iterations / s per job)")
    ax2.set_ylabel("gradient packets aggregated in the switch (%)")
    ax.set_title(title)
    ax2.set_title("in-network aggregation share")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(images, name), dpi=120)


def table(results, pta, prefix=""):
    base = points(results, prefix + "static-linear-")
    print(f"PTA = {pta['pta']} aggregators ({pta['share_per_job']} per job){', ' + prefix[:-1] if prefix else ''}")
    print("| % of PTA | aggregators | scheme | iterations/s per job | vs static 100% | vs static here "
          "| algbw Gbit/s | in-switch | collisions |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for scheme in LABELS:
        for percent, v in points(results, prefix + scheme + "-").items():
            rel = f"{v['ips'] / base[100]['ips']:.2f}" if 100 in base else "-"
            here = f"{v['ips'] / base[percent]['ips']:.2f}" if percent in base else "-"
            print(f"| {percent} | {round(pta['pta'] * percent / 100)} | {scheme} | {v['ips']:.0f} | {rel} | {here} | "
                  f"{v['algbw']:.1f} | {v['in_net'] * 100:.0f}% | {v['collisions']} |")


def settings_table(results):
    """ATP's defaults against static shares in the settings of run.py's SETTINGS."""
    print("| setting | % of PTA | static | ATP's defaults | ratio | collisions | all exact |")
    print("|---|---:|---:|---:|---:|---:|---|")
    names = sorted({os.path.basename(p)[len("setting-"):].split("-static-linear-")[0]
                    for p in glob.glob(os.path.join(results, "setting-*-static-linear-*.json"))})
    for name in names:
        fixed = points(results, f"setting-{name}-static-linear-")
        dynamic = points(results, f"setting-{name}-dynamic-allocated-")
        for percent in sorted(fixed, reverse=True):
            if percent not in dynamic:
                continue
            s, d = fixed[percent], dynamic[percent]
            print(f"| {name} | {percent} | {s['ips']:.0f} | {d['ips']:.0f} | {d['ips'] / s['ips']:.2f} | "
                  f"{d['collisions']} | {s['correct'] and d['correct']} |")


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    os.makedirs(images, exist_ok=True)
    pta = common.load_json(os.path.join(results, "pta.json"))
    plot_sweep(results, images, pta)
    plot_compare(results, images, pta)
    plot_compare(results, images, pta, "compute-", "Fig. 13a, compute 1 ms > allreduce (ns-3)",
                 "ns3-fig13a-compute.png")
    table(results, pta)
    table(results, pta, "compute-")
    settings_table(results)


if __name__ == "__main__":
    main(sys.argv[1:])
