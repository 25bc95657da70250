"""Plots of the Fig. 16 reproduction (experiments/ns3/fig16/run.py): reads its JSON, writes PNGs.

Usage: plot.py RESULTS_DIR IMAGE_DIR
  ns3-fig16.png            goodput over time of the ATP job (result bytes per worker) and the TCP
                           flow, ATP's congestion control on and off (ECN above 200 packets), and
                           on with ECN above 800 and only at a full buffer; dashed: the job alone;
                           shaded: the overlap
  ns3-fig16-threshold.png  mean goodput of both while they overlap (from the job's start to its last
                           round's end, and the final 2 ms of that), against the ECN threshold
Also prints the numbers as a Markdown table (docs/ns3-reproductions-network.md).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common  # noqa: E402

plt = common.pyplot()

PANELS = [("cc-on", "ATP CC on, ECN above 200 packets"), ("cc-off", "ATP CC off (window 200), ECN above 200"),
          ("ecn-800", "ATP CC on, ECN above 800 packets"), ("ecn-1000", "ATP CC on, ECN only at a full buffer"),
          ("reno", "ATP CC on, ECN above 200 packets, the flow's TCP Reno (ECN)")]
FINAL_S = 0.002  # the "final" means: the last 2 ms of the overlap, where it has settled (if it has)


def curves(doc):
    """(interval s, ATP goodput per sample (Gbit/s), TCP goodput per sample (Gbit/s))"""
    series = doc["series"]
    atp = series["jobs"][0]["goodput_gbps"]
    tcp = [m / 1000 for m in doc["flows"][0]["goodput_mbps"]] if doc["flows"] else []
    return series["interval_s"], atp, tcp


def job_start_s(doc):
    """The job's start is not in the JSON: the start of the first sample with ATP goodput (the
    scenario starts the job on a sample boundary)."""
    interval, atp, _ = curves(doc)
    for i, g in enumerate(atp):
        if g > 0:
            return i * interval
    return 0.0


def job_end_s(doc):
    """The end of the job's last round (round_end_seconds count from the run's start), or the end
    of the series if the job did not finish (the time limit)."""
    job = doc["jobs"][0]
    if job["round_end_seconds"] and job["completed_rounds"] == job["rounds"]:
        return job["round_end_seconds"][-1]
    interval, atp, _ = curves(doc)
    return len(atp) * interval


def window_means(doc, start_s, end_s):
    """Mean ATP and TCP goodput (Gbit/s) over the samples that lie wholly within [start_s, end_s]."""
    interval, atp, tcp = curves(doc)
    eps = interval * 1e-6
    picked = [i for i in range(len(atp)) if i * interval >= start_s - eps and (i + 1) * interval <= end_s + eps]

    def mean(xs):
        values = [xs[i] for i in picked if i < len(xs)]
        return sum(values) / len(values) if values else float("nan")

    return mean(atp), mean(tcp)


def overlap(doc, start_s):
    """(ATP, TCP) means over the whole overlap, from the job's start to its end, and over its
    final FINAL_S (whole samples only)."""
    end = job_end_s(doc)
    interval, _, _ = curves(doc)
    last_whole = int(end / interval + 1e-6) * interval
    return window_means(doc, start_s, end), window_means(doc, max(start_s, last_whole - FINAL_S), end)


def tcp_alone(doc, start_s):
    """TCP's mean goodput before the job starts, leaving out its first sample (slow start)."""
    interval, _, tcp = curves(doc)
    before = [tcp[i] for i in range(1, len(tcp)) if (i + 1) * interval <= start_s + interval * 1e-6]
    return sum(before) / len(before) if before else float("nan")


def main(argv):
    results, images = common.plot_dirs(argv, __doc__)
    alone = common.load_result(results, "alone")
    if alone is None:
        sys.exit(f"plot.py: no Fig. 16 results in {results}")
    os.makedirs(images, exist_ok=True)
    start = job_start_s(alone)
    alone_mean = window_means(alone, start, job_end_s(alone))[0]

    panels = [(name, title, common.load_result(results, name)) for name, title in PANELS]
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
        ax.axvspan(start * 1e3, job_end_s(doc) * 1e3, color="tab:blue", alpha=0.06, label="overlap (job running)")
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

    # Means while both run (the job's start to its end), and the threshold sweep.
    rows = []
    for name, k, cc in [("cc-on", 200, True), ("cc-off", 200, False), ("ecn-400", 400, True), ("ecn-600", 600, True),
                        ("ecn-800", 800, True), ("ecn-1000", 1000, True), ("reno", 200, True)]:
        doc = common.load_result(results, name)
        if doc is None:
            continue
        (a, t), (a_final, t_final) = overlap(doc, start)
        job = doc["jobs"][0]
        to_w0 = [link for link in doc["links"] if link["to"] == "w0"][0]
        rows.append((name, k, cc, a, t, a_final, t_final, job, to_w0, job_end_s(doc)))
    print(f"ATP job alone: {alone_mean:.1f} Gbit/s per worker (algbw {alone['jobs'][0]['algbw_gbps']:.1f}); "
          f"job start {start * 1e3:.1f} ms, end {job_end_s(alone) * 1e3:.2f} ms")
    cc_on = common.load_result(results, "cc-on")
    if cc_on is not None:
        print(f"TCP alone (cc-on, before the job starts): {tcp_alone(cc_on, start):.1f} Gbit/s")
    print("| run | ECN threshold | ATP CC | ATP, overlap | TCP, overlap | ATP, final 2 ms | TCP, final 2 ms "
          "| job end (ms) | rounds done | job algbw | drops to w0 | ECN marks to w0 | ATP retransmissions / timeouts |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, k, cc, a, t, a_final, t_final, job, link, end in rows:
        print(f"| {name} | {k} | {'on' if cc else 'off'} | {a:.1f} | {t:.1f} | {a_final:.1f} | {t_final:.1f} "
              f"| {end * 1e3:.2f} | {job['completed_rounds']}/{job['rounds']} | {job['algbw_gbps']:.1f} "
              f"| {link['queue_drops']} | {link['ecn_marked']} | {job['retransmissions']} / {job['timeouts']} |")
    sweep = [r for r in rows if r[2] and r[0] != "reno"]  # the CUBIC flow at each threshold
    if sweep:
        fig, ax = plt.subplots(figsize=(9, 3.8))
        ks = [r[1] for r in sweep]
        ax.plot(ks, [r[3] for r in sweep], "o-", color="tab:blue", label="ATP job, CC on (per worker): overlap")
        ax.plot(ks, [r[4] for r in sweep], "s-", color="tab:red", label="TCP flow: overlap")
        ax.plot(ks, [r[5] for r in sweep], "o:", color="tab:blue", fillstyle="none", label="ATP: final 2 ms")
        ax.plot(ks, [r[6] for r in sweep], "s:", color="tab:red", fillstyle="none", label="TCP: final 2 ms")
        off = [r for r in rows if not r[2]]
        if off:
            ax.plot([off[0][1]], [off[0][3]], "x", color="tab:blue", markersize=9, label="ATP job, CC off: overlap")
            ax.plot([off[0][1]], [off[0][4]], "x", color="tab:red", markersize=9, label="TCP flow, ATP CC off: overlap")
        ax.axhline(alone_mean, color="black", linestyle="--", linewidth=1, label="ATP job alone")
        ax.set_xlabel("ECN threshold of the switch queue to w0 (packets; buffer 1000)")
        ax.set_ylabel("mean goodput while both run (Gbit/s)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        ax.set_title("Who gets the link, by ECN threshold", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(images, "ns3-fig16-threshold.png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main(sys.argv[1:])
