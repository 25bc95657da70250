"""Plots of the netns experiments (experiments/netns/run.py): reads the JSON results, writes PNGs.

Usage: plot.py RESULTS_DIR IMAGE_DIR
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(results, name):
    with open(os.path.join(results, name + ".json")) as f:
        return json.load(f)


def round_goodput(job):
    """(time, Mbit/s) per round: the tensor over the time since the previous round ended."""
    ends = job["round_end_seconds"]
    points = []
    for i in range(1, len(ends)):
        dt = ends[i] - ends[i - 1]
        if dt > 0:
            points.append((ends[i], job["tensor_bytes"] * 8 / dt / 1e6))
    return points


def plot_allreduce(results, images):
    doc = load(results, "allreduce")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    by_algorithm = {}
    for row in doc["results"]:
        by_algorithm.setdefault(row["algorithm"], []).append(row)
    for algorithm, rows in by_algorithm.items():
        ax.plot([r["size_bytes"] for r in rows], [r["algbw_gbps"] * 1000 for r in rows], marker="o", label=algorithm)
    n = doc["workers"]
    rate = doc["rate_mbps"]
    ax.axhline(rate, color="gray", linestyle="--", linewidth=1, label="link rate")
    ax.axhline(rate * n / (2 * (n - 1)), color="gray", linestyle=":", linewidth=1, label="ring bound n/(2(n-1))")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tensor size per worker (bytes)")
    ax.set_ylabel("algbw (Mbit/s)")
    ax.set_title(f"allreduce, {n} workers in {doc['racks']} racks, {rate:.0f} Mbit/s links (netns)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(images, "netns-allreduce.png"), dpi=120)


def ps_bytes(doc):
    return sum(link["bytes"] for link in doc["links"] if link["to"] == "ps")


def plot_fig9(results, images):
    two = load(results, "fig9")
    rack = load(results, "fig9-rack-only")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    values = [ps_bytes(two) / 1e6, ps_bytes(rack) / 1e6]
    ax.bar(["two-level", "rack only"], values, color=["tab:blue", "tab:orange"])
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:.0f} MB", ha="center", va="bottom")
    ax.set_ylabel("bytes into the PS (MB)")
    ax.set_title(f"Fig. 9 topology: two-level / rack-only = {values[0] / values[1]:.2f}")
    fig.tight_layout()
    fig.savefig(os.path.join(images, "netns-fig9.png"), dpi=120)


def plot_two_jobs(results, images):
    doc = load(results, "two-jobs-small-table")
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for job in doc["jobs"]:
        points = round_goodput(job)
        label = (f"job {job['name']}: {job['collisions']} collisions, "
                 f"{job['in_network_share'] * 100:.0f}% aggregated in the switch")
        ax.step([p[0] for p in points], [p[1] for p in points], where="pre", label=label)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("tensor / round time (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("two jobs on a 48-aggregator switch (netns; round times include result checks)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(images, "netns-two-jobs.png"), dpi=120)


def plot_tcp(results, images):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, name, title in ((axes[0], "tcp-competition", "congestion control on"),
                            (axes[1], "tcp-competition-cc-off", "congestion control off")):
        doc = load(results, name)
        points = round_goodput(doc["jobs"][0])
        ax.step([p[0] for p in points], [p[1] for p in points], where="pre", label="ATP job (per round)")
        flow = doc["flows"][0]
        start = flow["start_seconds"]
        xs = [start + (i + 1) * flow["interval_s"] for i in range(len(flow["goodput_mbps"]))]
        ax.plot(xs, flow["goodput_mbps"], label="TCP flow (per 100 ms)")
        ax.set_title(title)
        ax.set_xlabel("time (s)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("goodput (Mbit/s)")
    axes[0].legend()
    fig.suptitle("ATP job and a TCP flow sharing a 200 Mbit/s link (netns)")
    fig.tight_layout()
    fig.savefig(os.path.join(images, "netns-tcp.png"), dpi=120)


def main():
    results, images = sys.argv[1], sys.argv[2]
    os.makedirs(images, exist_ok=True)
    plot_allreduce(results, images)
    plot_fig9(results, images)
    plot_two_jobs(results, images)
    plot_tcp(results, images)


if __name__ == "__main__":
    main()
