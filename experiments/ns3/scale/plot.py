"""Plots of the multi-rack scale experiment (experiments/ns3/scale/run.py): reads its JSON, writes PNGs.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-scale.png         algbw of ATP, the PS without aggregation and ring allreduce against the
                        number of workers (8 per rack), with each one's bound (the ring's: the
                        lower of its bandwidth and latency bounds); ATP's ratios
  ns3-scale-hashed.png  ATP with hashed indices at 2 racks: algbw and PS packets per fragment
                        against aggregators per switch (linear indices for reference)
Also prints the numbers as Markdown tables (docs/ns3-reproductions-network.md).
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

LINK_GBPS = 100.0
LINK_DELAY_S = 1e-6
NAME = re.compile(r"r(\d+)-(atp|ps|ring)\.json$")
HASHED = re.compile(r"hashed-a(\d+)\.json$")
STYLE = {"atp": ("ATP", "tab:blue", "o"), "ring": ("ring allreduce (TCP)", "tab:red", "s"),
         "ps": ("PS, no aggregation", "tab:gray", "^")}


def ring_latency_bound(n, racks, tensor_bytes):
    """The ring's algbw (Gbit/s) if only its chain of 2(n-1) dependent steps counted: a step's first
    segment leaves a rank after the previous step's first segment arrived from its left neighbour,
    one hop of 2 links in a rack (w -> ToR -> w) or 4 across racks (n - racks and racks of the n
    hops), each link 1 us plus one segment's serialisation."""
    per_link = LINK_DELAY_S + common.TCP_SEGMENT_WIRE_BYTES * 8 / (LINK_GBPS * 1e9)
    hops = (n - racks) * 2 + racks * 4 if racks > 1 else n * 2
    chain = 2 * (n - 1) * per_link * hops / n
    return tensor_bytes * 8 / chain / 1e9


def bound(algorithm, n, racks=None, tensor_bytes=None):
    """Best possible algbw (Gbit/s) of n workers on LINK_GBPS links; for the ring, the lower of its
    bandwidth bound and (given racks and tensor_bytes) its latency bound."""
    if algorithm == "atp":
        return LINK_GBPS * common.ATP_EFFICIENCY
    if algorithm == "ps":
        return LINK_GBPS * common.ATP_EFFICIENCY / n
    bandwidth = LINK_GBPS * common.TCP_EFFICIENCY * n / (2 * (n - 1))
    if racks is None or tensor_bytes is None:
        return bandwidth
    return min(bandwidth, ring_latency_bound(n, racks, tensor_bytes))


def load(results):
    sweep, hashed = {}, {}
    for path in glob.glob(os.path.join(results, "*.json")):
        with open(path) as f:
            doc = json.load(f)
        job = doc["jobs"][0]
        row = {"algbw": job["algbw_gbps"], "workers": job["workers"], "correct": job["correct"],
               "ps_packets": job["ps_packets_received"], "fragments": job["fragments"],
               "collisions": job["collisions"], "retransmissions": job["retransmissions"],
               "timeouts": job["timeouts"], "seconds": job["seconds"],
               "tensor_bytes": job["tensor_bytes"],
               "wall": doc.get("simulator", {}).get("wall_seconds", 0),
               "link_packets": doc.get("simulator", {}).get("link_packets", 0)}
        m = NAME.search(os.path.basename(path))
        if m:
            sweep[(int(m.group(1)), m.group(2))] = row
        m = HASHED.search(os.path.basename(path))
        if m:
            hashed[int(m.group(1))] = row
    return sweep, hashed


def tables(sweep, hashed):
    racks = sorted({r for r, _ in sweep})
    print("| racks | workers | ATP | of its bound | PS | of its bound | ring | of its bound | ATP / PS | ATP / ring |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in racks:
        cells = []
        n = None
        for a in ["atp", "ps", "ring"]:
            row = sweep.get((r, a))
            if row:
                n = row["workers"]
                cells += [f"{row['algbw']:.2f}", f"{row['algbw'] / bound(a, n, r, row['tensor_bytes']):.3f}"]
            else:
                cells += ["-", "-"]
        atp, ps, ring = (sweep.get((r, a)) for a in ["atp", "ps", "ring"])
        cells.append(f"{atp['algbw'] / ps['algbw']:.1f}x" if atp and ps else "-")
        cells.append(f"{atp['algbw'] / ring['algbw']:.2f}x" if atp and ring else "-")
        print(f"| {r} | {n} | " + " | ".join(cells) + " |")
    print()
    print("| racks | workers | ring bound: bandwidth | ring bound: latency (2(n-1) dependent steps) |")
    print("|---:|---:|---:|---:|")
    for r in racks:
        ring = sweep.get((r, "ring"))
        if ring:
            n = ring["workers"]
            print(f"| {r} | {n} | {bound('ring', n):.1f} | {ring_latency_bound(n, r, ring['tensor_bytes']):.1f} |")
    print()
    print("| run | workers | algbw (Gbit/s) | PS packets / fragment | collisions | retransmissions | timeouts "
          "| link packets | wall (s) | packets / wall s | correct |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    named = [(f"r{r}-{a}", row) for (r, a), row in sorted(sweep.items())] + \
            [(f"hashed-a{n}", row) for n, row in sorted(hashed.items())]
    for name, row in named:
        per = f"{row['ps_packets'] / row['fragments']:.2f}" if row["fragments"] else "-"
        pps = f"{row['link_packets'] / row['wall']:,.0f}" if row["wall"] else "-"
        print(f"| {name} | {row['workers']} | {row['algbw']:.2f} | {per} | {row['collisions']} | {row['retransmissions']} "
              f"| {row['timeouts']} | {row['link_packets']:,} | {row['wall']:.1f} | {pps} "
              f"| {'yes' if row['correct'] else 'NO'} |")


def plot_sweep(sweep, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    for a in ["atp", "ring", "ps"]:
        pts = sorted((row["workers"], row["algbw"]) for (r, alg), row in sweep.items() if alg == a)
        if not pts:
            continue
        label, color, marker = STYLE[a]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=label)
        sizes = sorted({(row["workers"], r, row["tensor_bytes"]) for (r, _), row in sweep.items()})
        ax.plot([n for n, _, _ in sizes], [bound(a, n, r, b) for n, r, b in sizes], linestyle="--", color=color,
                linewidth=0.9, alpha=0.7)
    ax.set_xscale("log", base=2)
    ns = sorted({row["workers"] for row in sweep.values()})
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("workers (8 per rack)")
    ax.set_ylabel("algbw (Gbit/s)")
    ax.set_ylim(0, 85)
    mb = next(iter(sweep.values()))["tensor_bytes"] / 2**20
    ax.set_title(f"allreduce of {mb:g} MB at 100 Gbit/s (dashed: bounds; ring: bandwidth or latency)", fontsize=10)
    if any(alg == "ps" for _, alg in sweep) and max(ns) > 32:
        ax.annotate("PS not run above 32 workers\n(its 32-bit bitmap)", (40, 8), fontsize=8, color="tab:gray")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 0.89))
    ax = axes[1]
    for other, color in [("ring", "tab:red"), ("ps", "tab:gray")]:
        pts = sorted((sweep[(r, "atp")]["workers"], sweep[(r, "atp")]["algbw"] / row["algbw"])
                     for (r, alg), row in sweep.items() if alg == other and (r, "atp") in sweep)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, label=f"ATP / {STYLE[other][0]}")
            for x, y in pts:
                ax.annotate(f"{y:.2f}x" if y < 10 else f"{y:.0f}x", (x, y), textcoords="offset points", xytext=(0, 6),
                            ha="center", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(1, 60)
    ax.set_yticks([1, 1.5, 2, 3, 5, 10, 20, 50])
    ax.set_yticklabels(["1", "1.5", "2", "3", "5", "10", "20", "50"])
    ax.minorticks_off()
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("workers (8 per rack)")
    ax.set_ylabel("algbw ratio")
    ax.set_title("ATP's speed-up", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_hashed(sweep, hashed, path):
    tables_ = sorted(hashed)
    linear = sweep.get((2, "atp"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    axes[0].plot(tables_, [hashed[n]["algbw"] for n in tables_], "o-", color="tab:orange", label="hashed indices")
    axes[1].plot(tables_, [hashed[n]["ps_packets"] / hashed[n]["fragments"] for n in tables_], "o-",
                 color="tab:orange", label="hashed indices")
    if linear:
        axes[0].axhline(linear["algbw"], color="tab:blue", linestyle="--", label="linear indices, 4096")
        axes[1].axhline(linear["ps_packets"] / linear["fragments"], color="tab:blue", linestyle="--",
                        label="linear indices, 4096")
    axes[0].set_ylabel("algbw (Gbit/s)")
    axes[0].set_ylim(0, 85)
    axes[1].set_ylabel("PS packets per fragment")
    axes[1].set_ylim(bottom=0)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(tables_)
        ax.set_xticklabels([str(n) for n in tables_])
        ax.set_xlabel("aggregators per switch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("ATP with hashed indices, 2 racks x 8 workers, 100 Gbit/s, window up to 1024")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    sweep, hashed = load(results)
    if not sweep:
        sys.exit(f"plot.py: no scale results in {results}")
    tables(sweep, hashed)
    os.makedirs(images, exist_ok=True)
    plot_sweep(sweep, os.path.join(images, "ns3-scale.png"))
    if hashed:
        plot_hashed(sweep, hashed, os.path.join(images, "ns3-scale-hashed.png"))


if __name__ == "__main__":
    main(sys.argv[1:])
