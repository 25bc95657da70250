"""Table and plot of the Fig. 11 reproduction (experiments/rina/fig11/run.py): reads its JSON and bom.txt.

Usage: plot.py RESULTS_DIR [RATE_GBPS]
  RESULTS_DIR/table.txt  per replacement step: ATP's and Rina's measured algbw beside `atp bom`'s
                         prediction (a fraction of the link bandwidth, times RATE_GBPS: 100 unless
                         given), and the ring baseline; also printed
  RESULTS_DIR/fig11.png  throughput vs replaced switches, measured and BOM, for ATP and Rina; where
                         matplotlib is missing, a text chart is printed instead
"""
import json
import os
import re
import sys

# The rows of `atp bom --incremental`: "(none)" or "+ SWITCH", then ATP's and Rina's throughput (B0).
STEP = re.compile(r"^(\(none\)|\+ (\S+))\s+([0-9.]+)\s+([0-9.]+)\s*$")
RING = re.compile(r"^ring\s+([0-9.]+)\s")


def read_bom(path):
    """(ring's throughput, [(switch added or None, ATP's, Rina's)]) in B0 from bom.txt."""
    ring, steps = None, []
    with open(path) as f:
        for line in f:
            m = RING.match(line)
            if m:
                ring = float(m.group(1))
            m = STEP.match(line)
            if m:
                steps.append((m.group(2), float(m.group(3)), float(m.group(4))))
    if ring is None or not steps:
        sys.exit(f"plot.py: {path} has no ring row or no incremental table; run run.py first")
    return ring, steps


def read_job(results, name):
    """The job of RESULTS/name.json, or None if the run is not there."""
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["jobs"][0]


def algbw(job):
    """Gbit/s, or None for a job that did not finish correctly (the table says so)."""
    return job["algbw_gbps"] if job and job["correct"] else None


def cell(value, width, digits=2):
    """value in a field of width, or "failed" for a job that did not finish correctly."""
    return f"{value:{width}.{digits}f}" if value is not None else f"{'failed':>{width}}"


def table(results, rate_gbps, ring_bom, steps):
    """The text table's lines, the rows [(step, switches, ATP, BOM ATP, Rina, BOM Rina)] in Gbit/s,
    and the gradient per worker in MiB."""
    ring = read_job(results, "ring")
    first = read_job(results, "rina-00") or read_job(results, "atp-00") or ring
    mib = first["tensor_bytes"] / 2**20 if first else float("nan")
    lines = [
        f"Rina's Fig. 11 on ns-3: k=4 fat-tree, {first['workers'] if first else '?'} workers, "
        f"{mib:.1f} MiB of float32 gradient per worker, one round, {rate_gbps:g} Gbit/s links",
        f"algbw (Gbit/s) measured; BOM: atp bom's prediction (bom.txt) x {rate_gbps:g} Gbit/s; "
        "in-net: the share of contributions the switches aggregated",
        "step  replaced        ATP  BOM ATP  in-net     Rina  BOM Rina  in-net  Rina/ATP",
    ]
    rows = []
    added = []
    for step, (switch, atp_bom, rina_bom) in enumerate(steps):
        if switch:
            added.append(switch)
        atp_job, rina_job = read_job(results, f"atp-{step:02d}"), read_job(results, f"rina-{step:02d}")
        if atp_job is None and rina_job is None:
            continue
        a, r = algbw(atp_job), algbw(rina_job)
        ratio = f"{r / a:8.2f}x" if a and r else f"{'-':>9}"
        share = [f"{j['in_network_share'] * 100:6.0f}%" if j else f"{'-':>7}" for j in (atp_job, rina_job)]
        label = "(none)" if not switch else f"+ {switch}"
        lines.append(f"{step:4d}  {label:<11} {cell(a, 7)}  {atp_bom * rate_gbps:7.2f} {share[0]}  {cell(r, 7)}  "
                     f"{rina_bom * rate_gbps:8.2f} {share[1]} {ratio}")
        rows.append((step, list(added), a, atp_bom * rate_gbps, r, rina_bom * rate_gbps))
    if ring:
        lines.append(f"ring (algorithm: ring over TCP, no INA, the same workers): {cell(algbw(ring), 0)} Gbit/s, "
                     f"BOM {ring_bom * rate_gbps:.2f}")
    return lines, rows, mib


def text_chart(rows, width=60):
    """A bar per step and series, scaled to the largest value."""
    top = max(v for row in rows for v in row[2:] if v is not None)
    out = [f"throughput vs replaced switches (Gbit/s; one # = {top / width:.2f})"]
    for step, _, a, a_bom, r, r_bom in rows:
        for name, v in (("ATP", a), ("ATP BOM", a_bom), ("Rina", r), ("Rina BOM", r_bom)):
            bar = "#" * round(v / top * width) if v is not None else "(failed)"
            out.append(f"{step:3d} {name:<8} {bar} {v if v is not None else 0:.2f}")
    return out


def plot(results, rows, ring, ring_bom, rate_gbps, mib):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [row[0] for row in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (name, color) in enumerate((("ATP", "tab:blue"), ("Rina", "tab:red"))):
        measured = [row[2 + 2 * i] for row in rows]
        ax.plot(steps, [float("nan") if v is None else v for v in measured], marker="o", color=color,
                label=f"{name}, ns-3")
        ax.plot(steps, [row[3 + 2 * i] for row in rows], linestyle="--", color=color, label=f"{name}, BOM")
    if ring is not None:
        ax.axhline(ring, color="gray", linestyle=":", label="ring (TCP), no INA, ns-3")
    ax.axhline(ring_bom, color="gray", linestyle="-.", linewidth=0.8, label="ring, BOM")
    ax.set_xticks(steps)
    ax.set_xticklabels(["none"] + [row[1][-1] for row in rows[1:]], rotation=60, ha="right", fontsize=8)
    ax.set_xlabel("switches made INA-capable, one at a time (Rina's §IV-D order)")
    ax.set_ylabel("algbw per worker (Gbit/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Fig. 11 (ns-3): k=4 fat-tree, 15 workers, {mib:.1f} MiB each, {rate_gbps:g} Gbit/s links")
    fig.tight_layout()
    fig.savefig(os.path.join(results, "fig11.png"), dpi=120)


def main(argv):
    if len(argv) not in (1, 2):
        sys.exit(__doc__)
    results = argv[0]
    rate_gbps = float(argv[1]) if len(argv) == 2 else 100.0
    ring_bom, steps = read_bom(os.path.join(results, "bom.txt"))
    lines, rows, mib = table(results, rate_gbps, ring_bom, steps)
    if not rows:
        sys.exit(f"plot.py: no atp-NN.json or rina-NN.json in {results}; run run.py first")
    with open(os.path.join(results, "table.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    ring = algbw(read_job(results, "ring"))
    try:
        plot(results, rows, ring, ring_bom * rate_gbps, rate_gbps, mib)
        print(f"plot.py: {os.path.join(results, 'fig11.png')}")
    except ImportError:
        print("plot.py: no matplotlib for /usr/bin/python3 (Debian: python3-matplotlib); a text chart instead")
        print("\n".join(text_chart(rows)))


if __name__ == "__main__":
    main(sys.argv[1:])
