"""Plots of the Fig. 15 reproduction (experiments/ns3/fig15/run.py): reads its JSON, writes PNGs.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig15.png        goodput per worker, window, in-switch vs PS aggregation over time
  ns3-fig15-sweep.png  the sweep that finds the job's need
Also prints the numbers as a Markdown table (docs/ns3-reproductions-aggregation.md).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

RUNS = [("cc-on-half", "CC on, half the aggregators"), ("cc-off-half", "CC off, half the aggregators"),
        ("cc-on-full", "CC on, all it needs (reference)")]


def binned(xs, n):
    """Means of consecutive groups of n samples (the last group may be shorter)."""
    return [sum(xs[i : i + n]) / len(xs[i : i + n]) for i in range(0, len(xs), n)]


def plot_series(results, images, need):
    fig, axes = plt.subplots(3, 1, figsize=(9, 8.5), sharex=True)
    colors = {"cc-on-half": "tab:blue", "cc-off-half": "tab:red", "cc-on-full": "tab:gray"}
    bin_ms = 0.5  # the thick lines: means over 0.5 ms (the paper averages per second)
    for name, label in RUNS:
        doc = common.load_result(results, name)
        if not doc or "series" not in doc:
            continue
        step = doc["series"]["interval_s"] * 1e3  # ms
        s = doc["series"]["jobs"][0]
        t = [(i + 1) * step for i in range(len(s["goodput_gbps"]))]
        n = max(1, round(bin_ms / step))
        tb = [t[min(i + n, len(t)) - 1] for i in range(0, len(t), n)]
        c = colors[name]
        axes[0].plot(t, s["goodput_gbps"], color=c, linewidth=0.4, alpha=0.5)
        axes[0].plot(tb, binned(s["goodput_gbps"], n), color=c, linewidth=1.8, label=label)
        axes[1].plot(t, s["window_packets"], color=c, linewidth=1.2, label=label)
        if name == "cc-on-full":
            continue
        # Gradient packets per microsecond: added into a switch aggregator vs received by the PS.
        per_us = 1e-3 / step
        axes[2].plot(tb, [x * per_us for x in binned(s["switch_aggregations"], n)], color=c, linewidth=1.5,
                     label=f"{label}: added in the switch")
        axes[2].plot(tb, [x * per_us for x in binned(s["ps_packets"], n)], color=c, linewidth=1.5, linestyle="--",
                     label=f"{label}: received by the PS")
    axes[0].set_ylabel("goodput per worker (Gbit/s)")
    axes[0].set_title(f"Fig. 15 (ns-3): 8 workers, 100 Gbit/s, {need['half']} of the {need['need']} aggregators "
                      f"it needs\n(thin: every {step * 1e3:.0f} us; thick: {bin_ms} ms means)")
    axes[1].set_ylabel("window (packets, mean of workers)")
    axes[1].set_yscale("log")
    axes[2].set_ylabel(f"gradient packets per us ({bin_ms} ms means)")
    axes[2].set_xlabel("simulated time (ms)")
    for a in axes:
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7, loc="upper right")
    axes[0].set_ylim(bottom=0)
    axes[2].set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(os.path.join(images, "ns3-fig15.png"), dpi=120)


def plot_sweep(images, need):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([p["aggregators"] for p in need["sweep"]], [p["algbw_gbps"] for p in need["sweep"]], marker="o")
    ax.axvline(need["need"], color="gray", linestyle="--", linewidth=1, label=f"need: {need['need']}")
    ax.axvline(need["half"], color="tab:red", linestyle=":", linewidth=1, label=f"half: {need['half']}")
    ax.set_xlabel("aggregators (linear index, CC on)")
    ax.set_ylabel("algbw (Gbit/s)")
    ax.set_title("Fig. 15 step 1: the 8-worker job's need (ns-3)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(images, "ns3-fig15-sweep.png"), dpi=120)


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    os.makedirs(images, exist_ok=True)
    need = common.load_json(os.path.join(results, "need.json"))
    plot_sweep(images, need)
    plot_series(results, images, need)
    print(f"need = {need['need']} aggregators (best {need['best_algbw_gbps']:.1f} Gbit/s); half = {need['half']}")
    print("| run | aggregators | algbw Gbit/s | simulated ms | in-switch | collisions | PS queue drops | ECN marks at PS | "
          "fast retransmits | timeouts |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, label in RUNS:
        doc = common.load_result(results, name)
        if not doc:
            continue
        j = doc["jobs"][0]
        to_ps = [link for link in doc["links"] if link["to"] == "ps"]
        print(f"| {label} | {need['need'] if name == 'cc-on-full' else need['half']} | {j['algbw_gbps']:.1f} | "
              f"{j['seconds'] * 1e3:.1f} | {j['in_network_share'] * 100:.0f}% | {j['collisions']} | "
              f"{sum(link['queue_drops'] for link in to_ps)} | {sum(link['ecn_marked'] for link in to_ps)} | "
              f"{j['fast_retransmits']} | {j['timeouts']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
