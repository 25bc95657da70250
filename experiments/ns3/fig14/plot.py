"""Plot of the Fig. 14 reproduction (experiments/ns3/fig14/run.py): reads its JSON, writes a PNG.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig14.png  per-job throughput while all jobs run (from --series) and aggregate throughput
                 until the last job ends, vs the number of jobs, per scheme
Also prints the numbers as a Markdown table (docs/ns3-reproductions-aggregation.md).
"""
import glob
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

LABELS = {
    "hashed": "hash-based dynamic (ATP)",
    "linear": "linear-based dynamic (seq % N)",
    "static": "static shares (SwitchML-style)",
    "hashed_slots": "hashed_slots (authors' code), each job at its part of the table",
    "allocated": "ATP's defaults: the switch allocates, table brake",
}
# What fits in a 100 Gbit/s link of 62-value fragments.
GOODPUT_BOUND_GBPS = 100 * common.ATP_EFFICIENCY


def start_seconds():
    """{job name: start time (s)} from jobs.yaml (the JSON does not report start_us)."""
    jobs = common.load_yaml(os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs.yaml"))["jobs"]
    return {j["name"]: j.get("start_us", 0) / 1e6 for j in jobs}


def while_all_run(doc, starts):
    """Each job's mean goodput (--series) over the intervals after the last job started and before
    the first one finished: its throughput while all n jobs compete. Without a full interval
    (tiny runs), its algbw."""
    jobs = doc["jobs"]
    last_start = max(starts[j["name"]] for j in jobs)
    first_end = min(j["round_end_seconds"][-1] for j in jobs if j["round_end_seconds"])  # from time 0
    series = doc.get("series")
    if series:
        dt = series["interval_s"]
        first, end = math.ceil(last_start / dt), int(first_end / dt)  # sample i covers [i dt, (i+1) dt)
        if end > first:
            return [sum(s["goodput_gbps"][first:end]) / (end - first) for s in series["jobs"]]
    return [j["algbw_gbps"] for j in jobs]


def summary(path):
    doc = common.load_json(path)
    jobs = doc["jobs"]
    starts = start_seconds()
    # Aggregate: every job's bytes over the time from the first start (time 0) until the last job
    # finished (round_end_seconds count from the run's start).
    makespan = max(j["round_end_seconds"][-1] for j in jobs if j["round_end_seconds"])
    total_bits = sum(j["tensor_bytes"] * 8 * j["completed_rounds"] for j in jobs)
    per_job = while_all_run(doc, starts)
    return {
        "n": len(jobs),
        "aggregate": total_bits / makespan / 1e9,
        "mean": sum(per_job) / len(per_job),
        "min": min(per_job),
        "max": max(per_job),
        "in_net": sum(j["in_network_share"] for j in jobs) / len(jobs),
        "collisions": sum(j["collisions"] for j in jobs),
        "retransmissions": sum(j["retransmissions"] for j in jobs),
        "timeouts": sum(j["timeouts"] for j in jobs),
        "correct": all(j["correct"] for j in jobs),
    }


def series(results, scheme):
    rows = [summary(p) for p in glob.glob(os.path.join(results, scheme + "-*.json"))]
    return sorted(rows, key=lambda r: r["n"])


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    os.makedirs(images, exist_ok=True)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
    for scheme, label in LABELS.items():
        rows = series(results, scheme)
        if not rows:
            continue
        ns = [r["n"] for r in rows]
        # Per job while all n jobs run, as a fraction of its fair share of the link (link / n):
        # bars from the slowest to the fastest job.
        fair = [GOODPUT_BOUND_GBPS / n for n in ns]
        mean = [r["mean"] / f for r, f in zip(rows, fair)]
        low = [m - r["min"] / f for m, r, f in zip(mean, rows, fair)]
        high = [r["max"] / f - m for m, r, f in zip(mean, rows, fair)]
        ax.errorbar(ns, mean, yerr=[low, high], marker="o", capsize=3, label=label)
        ax2.plot(ns, [r["aggregate"] for r in rows], marker="o", label=label)
    ns = list(range(1, 9))
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="fair share of the link")
    ax2.axhline(GOODPUT_BOUND_GBPS, color="gray", linestyle="--", linewidth=1, label="link goodput bound")
    ax.set_ylabel("per job / (link goodput / n)")
    ax2.set_ylabel("all jobs' bytes / time to the last (Gbit/s)")
    for a in (ax, ax2):
        a.set_xlabel("jobs (4 workers each; 192 aggregators per job = 100% PTA)")
        a.set_ylim(bottom=0)
        a.grid(True, alpha=0.3)
    ax.set_title("per job while all run (mean; bars: slowest..fastest)")
    ax2.set_title("aggregate, until the last job ends")
    fig.suptitle("Fig. 14 (ns-3): n jobs on one switch, 100% of PTA")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(os.path.join(images, "ns3-fig14.png"), dpi=120)

    print("| jobs | scheme | per job while all run, mean (min-max) Gbit/s | aggregate Gbit/s | in-switch | collisions | retransmissions |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for n in ns:
        for scheme in LABELS:
            for r in series(results, scheme):
                if r["n"] == n:
                    print(f"| {n} | {scheme} | {r['mean']:.1f} ({r['min']:.1f}-{r['max']:.1f}) | {r['aggregate']:.1f} | "
                          f"{r['in_net'] * 100:.0f}% | {r['collisions']} | {r['retransmissions']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
