"""Plot of the Fig. 10 reproduction (experiments/ns3/fig10/run.py): reads its JSON, writes a PNG.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig10.png  throughput normalised to no loss vs loss rate, and the time each lost packet costs
Also prints the numbers as a Markdown table (docs/ns3-reproductions-aggregation.md).
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

LABELS = {"atp": "ATP recovery (overdue holes or RTO)", "timeout": "timeout only, RTO 1 ms (SwitchML-style)"}
NAME = re.compile(r"(atp|timeout)-([0-9.e-]+)-s(\d+)\.json$")


def runs(results):
    """[(recovery, loss %, seed, job, packets lost on w0's link, packets on it)]"""
    out = []
    for path in glob.glob(os.path.join(results, "*.json")):
        m = NAME.search(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            doc = json.load(f)
        w0 = [link for link in doc["links"] if "w0" in (link["from"], link["to"])]
        out.append((m.group(1), float(m.group(2)), int(m.group(3)), doc["jobs"][0],
                    sum(link["lost"] for link in w0), sum(link["packets"] for link in w0)))
    return out


def groups(results):
    """{recovery: {loss %: row}} with per-seed normalised throughputs and their mean."""
    all_runs = runs(results)
    base = {r: job for r, loss, _, job, _, _ in all_runs if loss == 0}
    out = {}
    for recovery, loss, seed, job, lost, packets in sorted(all_runs, key=lambda x: (x[0], x[1], x[2])):
        if loss == 0 or recovery not in base:
            continue
        b = base[recovery]
        row = out.setdefault(recovery, {}).setdefault(loss, {"norm": [], "lost": [], "packets": [], "extra_us_per_loss": [],
                                                               "timeouts": [], "fast": [], "correct": True})
        row["norm"].append(job["algbw_gbps"] / b["algbw_gbps"])
        row["lost"].append(lost)
        row["packets"].append(packets)
        if lost:
            row["extra_us_per_loss"].append((job["seconds"] - b["seconds"]) / lost * 1e6)
        row["timeouts"].append(job["timeouts"])
        row["fast"].append(job["fast_retransmits"])
        row["correct"] = row["correct"] and job["correct"]
    return base, out


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    os.makedirs(images, exist_ok=True)
    base, data = groups(results)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for recovery, label in LABELS.items():
        rows = data.get(recovery, {})
        if not rows:
            continue
        losses = sorted(rows)
        line = ax.plot(losses, [mean(rows[x]["norm"]) for x in losses], marker="o", label=label)[0]
        for x in losses:
            ax.scatter([x] * len(rows[x]["norm"]), rows[x]["norm"], s=10, alpha=0.4, color=line.get_color())
        with_loss = [x for x in losses if rows[x]["extra_us_per_loss"]]
        ax2.plot(with_loss, [mean(rows[x]["extra_us_per_loss"]) for x in with_loss], marker="o", label=label)
    ticks = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1]
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_xticks(ticks)
        a.set_xticklabels([f"{t:g}" for t in ticks])
        a.minorticks_off()
        a.set_xlabel("loss rate on w0's link, both directions (%)")
        a.grid(True, alpha=0.3)
    ax2.legend(fontsize=8, loc="center right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("throughput / throughput without loss")
    ax.set_title("Fig. 10 (ns-3): 4 workers, 100 Gbit/s, CC off (dots: seeds)")
    ax2.set_yscale("log")
    ax2.set_ylabel("extra time per lost packet (us)")
    ax2.set_title("what one loss costs")
    fig.tight_layout()
    fig.savefig(os.path.join(images, "ns3-fig10.png"), dpi=120)

    for recovery, b in sorted(base.items()):
        print(f"no loss, {recovery}: {b['algbw_gbps']:.1f} Gbit/s, {b['seconds'] * 1e3:.2f} ms")
    print("| loss | seeds | packets on w0's link per run | lost per run (mean) | ATP (mean, min-max) | timeout only (mean, min-max) | "
          "extra us per loss ATP / timeout | timeouts per run ATP / timeout |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    atp, timeout = data.get("atp", {}), data.get("timeout", {})
    for loss in sorted(set(atp) | set(timeout)):
        a, t = atp.get(loss), timeout.get(loss)
        ref = a or t

        def cell(r):
            return f"{mean(r['norm']):.3f} ({min(r['norm']):.3f}-{max(r['norm']):.3f})" if r else "-"

        def per_loss(r):
            return f"{mean(r['extra_us_per_loss']):.0f}" if r and r["extra_us_per_loss"] else "-"

        def timeouts(r):
            return f"{mean(r['timeouts']):.0f}" if r else "-"

        print(f"| {loss:g}% | {len(ref['norm'])} | {mean(ref['packets']):.0f} | {mean(ref['lost']):.1f} | {cell(a)} | {cell(t)} | "
              f"{per_loss(a)} / {per_loss(t)} | {timeouts(a)} / {timeouts(t)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
