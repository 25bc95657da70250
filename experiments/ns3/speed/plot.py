"""Plot of the simulator-speed experiment (experiments/ns3/speed/run.py): reads its JSON, writes a PNG.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-speed.png  link packets per second of wall-clock and of CPU time, ns-3 vs the in-process
                 network, for the same 64-worker ATP job
Also prints the numbers as a Markdown table (docs/ns3-reproductions-network.md).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

BACKENDS = [("ns3", "ns-3", "tab:blue"), ("inproc", "in-process", "tab:green")]


def load(results):
    rows = {}
    for backend, _, _ in BACKENDS:
        run, timing = (os.path.join(results, f"{backend}{s}.json") for s in ("", "-time"))
        if not (os.path.exists(run) and os.path.exists(timing)):
            continue
        with open(run) as f:
            doc = json.load(f)
        with open(timing) as f:
            t = json.load(f)
        packets = sum(link["packets"] for link in doc["links"])
        job = doc["jobs"][0]
        rows[backend] = {
            "packets": packets,
            "wall": t["wall_seconds"],
            "cpu": t["cpu_seconds"],
            "inner_wall": doc.get("simulator", {}).get("wall_seconds"),
            "events": doc["events"],
            "simulated": doc["simulated_seconds"],
            "algbw": job["algbw_gbps"],
            "correct": job["correct"],
            "workers": job["workers"],
        }
    return rows


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    rows = load(results)
    if not rows:
        sys.exit(f"plot.py: no speed results in {results}")
    print("| backend | link packets | simulated (ms) | events | wall (s) | CPU (s) | packets / wall s "
          "| packets / CPU s | wall s per simulated ms | algbw (Gbit/s) | correct |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for backend, label, _ in BACKENDS:
        r = rows.get(backend)
        if not r:
            continue
        print(f"| {label} | {r['packets']:,} | {r['simulated'] * 1e3:.3f} | {r['events']:,} | {r['wall']:.2f} "
              f"| {r['cpu']:.2f} | {r['packets'] / r['wall']:,.0f} | {r['packets'] / r['cpu']:,.0f} "
              f"| {r['wall'] / (r['simulated'] * 1e3):.1f} | {r['algbw']:.1f} | {'yes' if r['correct'] else 'NO'} |")
    if "ns3" in rows and "inproc" in rows:
        print(f"in-process / ns-3: {rows['ns3']['wall'] / rows['inproc']['wall']:.1f}x faster (wall), "
              f"{rows['ns3']['cpu'] / rows['inproc']['cpu']:.1f}x (CPU); same link packets: "
              f"{rows['ns3']['packets'] == rows['inproc']['packets']}")
    present = [(b, label, color) for b, label, color in BACKENDS if b in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    labels = [label for _, label, _ in present]
    colors = [color for _, _, color in present]
    wall = [rows[b]["packets"] / rows[b]["wall"] / 1e6 for b, _, _ in present]
    cpu = [rows[b]["packets"] / rows[b]["cpu"] / 1e6 for b, _, _ in present]
    for ax, values, title in [(axes[0], wall, "per second of wall-clock time"), (axes[1], cpu, "per second of CPU time")]:
        bars = ax.bar(labels, values, color=colors)
        for b, v in zip(bars, values):
            ax.annotate(f"{v:.2f} M", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=9)
        ax.set_ylim(0, max(values) * 1.15)
        ax.set_ylabel("link packets (millions)")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    any_row = next(iter(rows.values()))
    fig.suptitle(f"Simulator speed: one ATP job of {any_row['workers']} workers, "
                 f"{any_row['packets'] / 1e6:.1f} M link packets")
    fig.tight_layout()
    os.makedirs(images, exist_ok=True)
    fig.savefig(os.path.join(images, "ns3-speed.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main(sys.argv[1:])
