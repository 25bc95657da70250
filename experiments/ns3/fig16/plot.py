"""Plots of the Fig. 16 reproduction (experiments/ns3/fig16/run.sh): reads its JSON, writes PNGs.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig16.png            goodput over time of the ATP job (result bytes per worker) and the TCP
                           flow, ATP's congestion control on and off (ECN above 200 packets), and
                           on with ECN only at a full buffer; dashed: the job alone
  ns3-fig16-threshold.png  mean goodput of both while they overlap, against the ECN threshold
Also prints the numbers as a Markdown table (docs/ns3-reproductions-network.md).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [("cc-on", "ATP CC on, ECN above 200 packets"), ("cc-off", "ATP CC off (window 200), ECN above 200"),
          ("ecn-800", "ATP CC on, ECN above 800 packets"), ("ecn-1000", "ATP CC on, ECN only at a full buffer")]
SETTLE_S = 0.001  # samples this long after the job's start are left out of the means


def load(results, name):
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def curves(doc):
    """(interval s, job start s, ATP goodput per sample (Gbit/s), TCP goodput per sample (Gbit/s))"""
    series = doc["series"]
    atp = series["jobs"][0]["goodput_gbps"]
    tcp = [m / 1000 for m in doc["flows"][0]["goodput_mbps"]] if doc["flows"] else []
    return series["interval_s"], atp, tcp


def overlap_means(doc, start_s):
    """Mean ATP and TCP goodput (Gbit/s) over the samples where both run, after SETTLE_S."""
    interval, atp, tcp = curves(doc)
    n = min(len(atp), len(tcp)) - 1  # the last sample of either is cut short by the job's end
    picked = [i for i in range(n) if (i + 1) * interval > start_s + SETTLE_S]
    if not picked:
        return float("nan"), float("nan")
    return (sum(atp[i] for i in picked) / len(picked), sum(tcp[i] for i in picked) / len(picked))


def job_start_s(doc_name, results):
    """The job's start from the scenario is not in the JSON: the first sample with ATP goodput."""
    doc = load(results, doc_name)
    interval, atp, _ = curves(doc)
    for i, g in enumerate(atp):
        if g > 0:
            return i * interval
    return 0.0


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    results, images = argv
    alone = load(results, "alone")
    if alone is None:
        sys.exit(f"plot.py: no Fig. 16 results in {results}")
    os.makedirs(images, exist_ok=True)
    a_interval, a_atp, _ = curves(alone)
    start = job_start_s("alone", results)
    peak = max(a_atp) if a_atp else 0.0
    steady = [g for i, g in enumerate(a_atp[:-1]) if (i + 1) * a_interval > start + SETTLE_S]
    alone_mean = sum(steady) / len(steady) if steady else peak

    panels = [(name, title, load(results, name)) for name, title in PANELS]
    panels = [p for p in panels if p[2] is not None]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.4 * len(panels) + 0.6), sharex=True, squeeze=False)
    for ax, (name, title, doc) in zip(axes[:, 0], panels):
        interval, atp, tcp = curves(doc)
        t_atp = [(i + 1) * interval * 1e3 for i in range(len(atp))]
        t_tcp = [(i + 1) * interval * 1e3 for i in range(len(tcp))]
        ax.plot(t_tcp, tcp, color="tab:red", label="TCP flow (non-ATP)")
        ax.plot(t_atp, atp, color="tab:blue", label="ATP job (per worker)")
        n = min(len(atp), len(tcp))
        ax.plot(t_atp[:n], [atp[i] + tcp[i] for i in range(n)], color="gray", linewidth=0.8, label="sum")
        ax.axhline(alone_mean, color="black", linestyle="--", linewidth=1, label="ATP job alone")
        ax.set_ylim(0, 110)
        ax.set_ylabel("Gbit/s")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, loc="center right")
    axes[-1, 0].set_xlabel("simulated time (ms); TCP from 0, the job from its start until it ends or the 30 ms limit")
    fig.suptitle("Fig. 16 on ns-3: ATP job vs a TCP flow on the link to one worker, 100 Gbit/s")
    fig.tight_layout()
    fig.savefig(os.path.join(images, "ns3-fig16.png"), dpi=110)
    plt.close(fig)

    # Means while both run, and the threshold sweep.
    rows = []
    for name, k, cc in [("cc-on", 200, True), ("cc-off", 200, False), ("ecn-400", 400, True), ("ecn-600", 600, True),
                        ("ecn-800", 800, True), ("ecn-1000", 1000, True)]:
        doc = load(results, name)
        if doc is None:
            continue
        a, t = overlap_means(doc, start)
        job = doc["jobs"][0]
        to_w0 = [link for link in doc["links"] if link["to"] == "w0"][0]
        rows.append((name, k, cc, a, t, job, to_w0))
    print(f"ATP job alone: {alone_mean:.1f} Gbit/s per worker (algbw {alone['jobs'][0]['algbw_gbps']:.1f})")
    print("| run | ECN threshold | ATP CC | ATP goodput (Gbit/s) | TCP goodput (Gbit/s) | rounds done | drops to w0 "
          "| ECN marks to w0 |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, k, cc, a, t, job, link in rows:
        print(f"| {name} | {k} | {'on' if cc else 'off'} | {a:.1f} | {t:.1f} | {job['completed_rounds']}/{job['rounds']} "
              f"| {link['queue_drops']} | {link['ecn_marked']} |")
    sweep = [r for r in rows if r[2]]
    if sweep:
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        ks = [r[1] for r in sweep]
        ax.plot(ks, [r[3] for r in sweep], "o-", color="tab:blue", label="ATP job, CC on (per worker)")
        ax.plot(ks, [r[4] for r in sweep], "s-", color="tab:red", label="TCP flow")
        off = [r for r in rows if not r[2]]
        if off:
            ax.plot([off[0][1]], [off[0][3]], "x", color="tab:blue", markersize=9, label="ATP job, CC off")
            ax.plot([off[0][1]], [off[0][4]], "x", color="tab:red", markersize=9, label="TCP flow, ATP CC off")
        ax.axhline(alone_mean, color="black", linestyle="--", linewidth=1, label="ATP job alone")
        ax.set_xlabel("ECN threshold of the switch queue to w0 (packets; buffer 1000)")
        ax.set_ylabel("mean goodput while both run (Gbit/s)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("Who gets the link, by ECN threshold", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(images, "ns3-fig16-threshold.png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main(sys.argv[1:])
