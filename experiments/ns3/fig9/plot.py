"""Plot of the Fig. 9 reproduction (experiments/ns3/fig9/run.py): reads its JSON, writes a PNG.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig9.png  traffic into the PS (MB on the link to it, and PS packets per fragment) and algbw,
                per scheme (two-level, RSS, rack-only) and aggregator index (linear, hashed)
Also prints the numbers as a Markdown table (docs/ns3-reproductions-network.md).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

SCHEMES = [("two-level", "ATP two-level"), ("rss", "RSS (paper's)"), ("rack-only", "rack-only")]
INDICES = [("linear", "linear indices", "tab:blue"), ("hashed", "hashed indices (paper's)", "tab:orange")]


def load(results):
    """{(scheme, index): row} for every JSON present."""
    out = {}
    for scheme, _ in SCHEMES:
        for index, _, _ in INDICES:
            path = os.path.join(results, f"{scheme}-{index}.json")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                doc = json.load(f)
            job = doc["jobs"][0]
            into = [link for link in doc["links"] if link["to"] == "ps"]
            out[(scheme, index)] = {
                "into_ps_bytes": sum(link["bytes"] for link in into),
                "into_ps_packets": sum(link["packets"] for link in into),
                "ps_packets": job["ps_packets_received"],
                "fragments": job["fragments"],
                "algbw": job["algbw_gbps"],
                "collisions": job["collisions"],
                "retransmissions": job["retransmissions"],
                "drops": sum(link["queue_drops"] for link in doc["links"]),
                "correct": job["correct"],
            }
    return out


def table(rows):
    print("| index | scheme | MB into the PS | PS packets / fragment | vs two-level | algbw (Gbit/s) "
          "| collisions | retransmissions | correct |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for index, _, _ in INDICES:
        base = rows.get(("two-level", index))
        for scheme, label in SCHEMES:
            r = rows.get((scheme, index))
            if not r:
                continue
            ratio = f"{base['into_ps_bytes'] / r['into_ps_bytes']:.3f}" if base else "-"
            print(f"| {index} | {label} | {r['into_ps_bytes'] / 1e6:.1f} | {r['ps_packets'] / r['fragments']:.2f} "
                  f"| {ratio} | {r['algbw']:.1f} | {r['collisions']} | {r['retransmissions']} "
                  f"| {'yes' if r['correct'] else 'NO'} |")


def plot(rows, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.38
    for k, (index, label, color) in enumerate(INDICES):
        xs = [i + (k - 0.5) * width for i in range(len(SCHEMES))]
        mb = [rows[(s, index)]["into_ps_bytes"] / 1e6 if (s, index) in rows else 0 for s, _ in SCHEMES]
        per = [rows[(s, index)]["ps_packets"] / rows[(s, index)]["fragments"] if (s, index) in rows else 0
               for s, _ in SCHEMES]
        bw = [rows[(s, index)]["algbw"] if (s, index) in rows else 0 for s, _ in SCHEMES]
        bars = axes[0].bar(xs, mb, width, label=label, color=color)
        for b, p in zip(bars, per):
            axes[0].annotate(f"{p:.2f}/frag", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                             va="bottom", fontsize=8)
        axes[1].bar(xs, bw, width, label=label, color=color)
    for ax in axes:
        ax.set_xticks(range(len(SCHEMES)))
        ax.set_xticklabels([label for _, label in SCHEMES])
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("bytes on the link into the PS (MB)")
    axes[0].set_title("traffic into the PS (3 rounds of a 4 MB tensor)")
    axes[0].legend(fontsize=8)
    ceiling = 100 * common.ATP_EFFICIENCY
    axes[1].axhline(ceiling, color="gray", linestyle="--", linewidth=1)
    axes[1].annotate(f"ATP ceiling {ceiling:.0f} Gbit/s", (2.4, ceiling), ha="right", va="bottom", fontsize=8,
                     color="gray")
    axes[1].set_ylabel("algbw (Gbit/s)")
    axes[1].set_title("allreduce throughput, 100 Gbit/s links")
    fig.suptitle("Fig. 9 topology on ns-3: 6 workers in 3 racks, PS in the third rack")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    rows = load(results)
    if not rows:
        sys.exit(f"plot.py: no Fig. 9 results in {results}")
    table(rows)
    os.makedirs(images, exist_ok=True)
    plot(rows, os.path.join(images, "ns3-fig9.png"))


if __name__ == "__main__":
    main(sys.argv[1:])
